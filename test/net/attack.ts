// Hostile clients for the hostile suite: peers that never learn the token and try to make a
// listener on 127.0.0.1 buffer, log or crash. Each connection resolves with what the server sent
// back, so a test can tell a refusal at accept from one after reading, both from a silent drop,
// and all of them from a connection the kernel never let through. Also: a process's memory.
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/** What the server did with one hostile connection. */
export interface Answer {
  /** The server's bytes, latin1. */
  reply: string;
  /** Whether the TCP connection was established at all (a listener's backlog can overflow). */
  connected: boolean;
  /** The socket error that ended it, if any (ECONNRESET after a refusal is normal). */
  error: string | null;
}

/** One 64 KiB block, written again and again: the attack costs this process no memory. */
const BLOCK = Buffer.alloc(64 << 10, 0x41);

/**
 * Opens a connection, declares a frame of `declared` bytes and sends `declared - 1` of them as
 * fast as the server takes them. Resolves once the connection ends (or after `timeoutMs`).
 */
export function declareFrame(port: number, declared: number, timeoutMs = 30_000): Promise<Answer> {
  let left = declared - 1;
  return exchange(port, timeoutMs, (socket) => {
    const pour = () => {
      while (left > 0 && !socket.destroyed) {
        const n = Math.min(left, BLOCK.length);
        left -= n;
        if (!socket.write(n === BLOCK.length ? BLOCK : BLOCK.subarray(0, n))) return;
      }
    };
    socket.on("drain", pour);
    socket.write(`${declared}\n`);
    pour();
  });
}

/** Sends `bytes` and resolves once the server closed the connection (or after `timeoutMs`). */
export function sendOnce(port: number, bytes: Buffer | string, timeoutMs = 30_000): Promise<Answer> {
  return exchange(port, timeoutMs, (socket) => socket.write(bytes));
}

function exchange(port: number, timeoutMs: number, onConnect: (socket: Socket) => void): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    const answer: Answer = { reply: "", connected: false, error: null };
    const end = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => {
      answer.error ??= "timeout";
      end();
    }, timeoutMs);
    socket.on("connect", () => {
      answer.connected = true;
      onConnect(socket);
    });
    socket.on("data", (d: Buffer) => (answer.reply += d.toString("latin1")));
    socket.on("error", (err: NodeJS.ErrnoException) => (answer.error ??= err.code ?? err.message));
    socket.on("close", end);
  });
}

/** The malformed first frames of the flood: broken framing, broken JSON, broken schemas, no token. */
export function malformedFrames(token: string): Buffer[] {
  const frame = (obj: unknown) => {
    const body = Buffer.from(JSON.stringify(obj));
    return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
  };
  const raw = (body: string) => Buffer.concat([Buffer.from(`${Buffer.byteLength(body)}\n`), Buffer.from(body)]);
  return [
    Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x0a]),
    Buffer.from("999999999\n"),
    Buffer.from("\n{}"),
    Buffer.from("0\n"),
    raw("x\x1b[2J\x1b[H"),
    raw("[1,2,3]"),
    raw('{"type":12}'),
    frame({ type: "status", token: "x".repeat(32), json: false }),
    frame({ type: "hello", token: "wrong", protocol: 1, host: "h", jobs: 1, slots: 1 }),
    frame({ type: "done", chunk_id: 1, elapsed: 1, rc: 0, outcome: "complete", error: null }),
    frame({ type: `gimme\x1b[2J\n`, token: `${token.slice(0, 4)}-not-it` }),
  ];
}

/** Runs `total` calls of `one(i)`, at most `concurrency` at a time; resolves with their results in order. */
export async function flood<T>(total: number, concurrency: number, one: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(total);
  let next = 0;
  const lane = async () => {
    while (next < total) {
      const i = next++;
      results[i] = await one(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, total) }, lane));
  return results;
}

/** VmRSS (now) and VmHWM (the peak so far) of a live process, in MB (10^6 bytes). */
export function memoryOf(pid: number): { rssMB: number; peakMB: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kB = (field: string) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
    if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
    return (Number(m[1]) * 1024) / 1e6;
  };
  return { rssMB: kB("VmRSS"), peakMB: kB("VmHWM") };
}

/** What the server's answer to one hostile connection amounts to. */
export function answerKind(a: Answer): "refused at accept" | "refused" | "never connected" | "no reply" {
  if (!a.connected) return "never connected";
  if (!a.reply.includes('"type":"refuse"')) return "no reply";
  return a.reply.includes("awaiting authentication") ? "refused at accept" : "refused";
}

/**
 * Connections left hanging: neither refused with a reason nor reset. A refused peer that keeps
 * writing is reset when the server closes its socket after the grace, and one that had not read
 * its refusal by then (the attacking process is busy pouring) sees only the reset.
 */
export function unanswered(answers: Answer[]): Answer[] {
  return answers.filter((a) => answerKind(a) === "no reply" && a.error !== "ECONNRESET" && a.error !== "EPIPE");
}

/**
 * The memory attack on the listener at `port` (process `pid`): `declarers` connections, each
 * declaring a 4 MiB first frame, each back `reconnectMs` after its refusal, for as long as
 * `during()` runs; the listener's VmRSS is sampled every 100 ms meanwhile.
 */
export async function besiege<T>(
  port: number,
  pid: number,
  o: { declarers: number; reconnectMs: number },
  during: () => Promise<T>,
): Promise<{ result: T; declared: Answer[]; rssMaxMB: number; seconds: number }> {
  const startMs = Date.now();
  let attacking = true;
  let rssMaxMB = memoryOf(pid).rssMB;
  const sampler = (async () => {
    while (attacking) {
      rssMaxMB = Math.max(rssMaxMB, memoryOf(pid).rssMB);
      await sleep(100);
    }
  })();
  const declarers = Array.from({ length: o.declarers }, async () => {
    const answers: Answer[] = [];
    do {
      answers.push(await declareFrame(port, 4 << 20));
      if (attacking) await sleep(o.reconnectMs);
    } while (attacking);
    return answers;
  });
  let result: T;
  try {
    result = await during();
  } finally {
    attacking = false;
  }
  const declared = (await Promise.all(declarers)).flat();
  await sampler;
  return { result, declared, rssMaxMB, seconds: (Date.now() - startMs) / 1000 };
}
