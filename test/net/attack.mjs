// Hostile clients, shared by the hostile suite (test/net/hostile-*.test.ts) and its benchmark
// (bench/hostile.mjs): peers that never learn the token and try to make a listener on 127.0.0.1
// buffer, log or crash. Each connection resolves with what the server sent back, so a caller can
// tell a refusal at accept from one after reading, both from a silent drop, and all of them from a
// connection the kernel never let through. Also: a process's memory. Plain JavaScript so that the
// benchmark runs it without a TypeScript loader; its types are attack.d.mts.
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/** One 64 KiB block, written again and again: the attack costs this process no memory. */
const BLOCK = Buffer.alloc(64 << 10, 0x41);

/**
 * Opens a connection, declares a frame of `declared` bytes and sends `declared - 1` of them as
 * fast as the server takes them. Resolves once the connection ends (or after `timeoutMs`).
 */
export function declareFrame(port, declared, timeoutMs = 30_000) {
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
export function sendOnce(port, bytes, timeoutMs = 30_000) {
  return exchange(port, timeoutMs, (socket) => socket.write(bytes));
}

function exchange(port, timeoutMs, onConnect) {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    const answer = { reply: "", connected: false, error: null };
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
    socket.on("data", (d) => (answer.reply += d.toString("latin1")));
    socket.on("error", (err) => (answer.error ??= err.code ?? err.message));
    socket.on("close", end);
  });
}

/** The malformed first frames of the flood: broken framing, broken JSON, broken schemas, no token. */
export function malformedFrames(token) {
  const frame = (obj) => {
    const body = Buffer.from(JSON.stringify(obj));
    return Buffer.concat([Buffer.from(`${body.length}\n`), body]);
  };
  const raw = (body) => Buffer.concat([Buffer.from(`${Buffer.byteLength(body)}\n`), Buffer.from(body)]);
  return [
    Buffer.from([0xde, 0xad, 0xbe, 0xef, 0x0a]),
    Buffer.from("999999999\n"),
    Buffer.from("\n{}"),
    Buffer.from("0\n"),
    raw("x\x1b[2J\x1b[H"),
    raw("[1,2,3]"),
    raw('{"type":12}'),
    frame({ type: "status", token: "x".repeat(32), json: false }),
    frame({ type: "hello", token: "wrong", protocol: 1, host: "h\nforged", jobs: 1, slots: 1 }),
    frame({ type: "done", chunk_id: 1, elapsed: 1, rc: 0, outcome: "complete", error: null }),
    frame({ type: `gimme\x1b[2J\n`, token: `${token.slice(0, 4)}-not-it` }),
  ];
}

/** Runs `total` calls of `one(i)`, at most `concurrency` at a time; resolves with their results in order. */
export async function flood(total, concurrency, one) {
  const results = new Array(total);
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
export function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kB = (field) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
    if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
    return (Number(m[1]) * 1024) / 1e6;
  };
  return { rssMB: kB("VmRSS"), peakMB: kB("VmHWM") };
}

/** What the server's answer to one hostile connection amounts to. */
export function answerKind(a) {
  if (!a.connected) return "never connected";
  if (!a.reply.includes('"type":"refuse"')) return "no reply";
  return a.reply.includes("awaiting authentication") ? "refused at accept" : "refused";
}

/**
 * answerKind, with a connection reset before any reply told apart from one left hanging. A refused
 * peer that keeps writing is reset when the server closes its socket after the grace, and one that
 * had not read its refusal by then (the attacking process is busy pouring) sees only the reset.
 */
export function outcomeOf(a) {
  const kind = answerKind(a);
  return kind === "no reply" && (a.error === "ECONNRESET" || a.error === "EPIPE") ? "reset" : kind;
}

/** Connections left hanging: neither refused with a reason nor reset. */
export function unanswered(answers) {
  return answers.filter((a) => outcomeOf(a) === "no reply");
}

/**
 * The memory attack on the listener at `port` (process `pid`): `declarers` connections, each
 * declaring a 4 MiB first frame, each back `reconnectMs` after its refusal, for as long as
 * `during()` runs; the listener's VmRSS is sampled every 100 ms meanwhile.
 */
export async function besiege(port, pid, o, during) {
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
    const answers = [];
    do {
      answers.push(await declareFrame(port, 4 << 20));
      if (attacking) await sleep(o.reconnectMs);
    } while (attacking);
    return answers;
  });
  let result;
  try {
    result = await during();
  } finally {
    attacking = false;
  }
  const declared = (await Promise.all(declarers)).flat();
  await sampler;
  return { result, declared, rssMaxMB: Math.max(rssMaxMB, memoryOf(pid).rssMB), seconds: (Date.now() - startMs) / 1000 };
}
