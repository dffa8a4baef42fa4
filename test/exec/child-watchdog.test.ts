// The child watchdog (src/exec/child-watchdog.ts) with real processes and both starters: a process
// that started children is SIGKILLed, and their whole process groups must die; a released group
// must not; Ctrl-C does not take the watchdog down; a killed watchdog is replaced; and nothing
// keeps a finished process alive or leaves the watchdog behind.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { scratchDirs } from "../helpers/scratch.ts";
import { alive, liveGroupMembers, procStat, watchdogsOf } from "./fixtures/processes.ts";

const LINUX_PROC = existsSync("/proc/self/stat");
const OPTIONS = { timeout: 90_000, skip: !LINUX_PROC && "needs /proc" };
/** Generous: the watchdog gives SIGTERM 2 s before SIGKILL, and the machine may be busy. */
const GONE_WITHIN_MS = 30_000;
const HOLDER = fileURLToPath(new URL("./fixtures/child-holder.ts", import.meta.url));

const { freshDir } = scratchDirs("watchdog");

async function waitUntil(what: string, done: () => boolean, timeoutMs = GONE_WITHIN_MS): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > end) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function pidsInLog(path: string): number[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => /^\d+$/.test(line))
    .map(Number);
}

interface Holder {
  child: ChildProcess;
  pid: number;
  /** The next JSON line it printed. */
  next(): Promise<Record<string, unknown>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const leftovers = new Set<number>();
after(() => {
  for (const pgid of leftovers) {
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // gone, as it should be
    }
  }
});

/** Starts the fixture in a process group of its own, as a shell starts a job. */
function startHolder(starter: string, mode: string, dir: string, env: NodeJS.ProcessEnv = process.env, extra: string[] = []): Holder {
  const child = spawn(process.execPath, ["--import", "tsx", HOLDER, starter, mode, dir, ...extra], { stdio: ["ignore", "pipe", "inherit"], detached: true, env });
  assert.ok(child.pid !== undefined);
  leftovers.add(child.pid);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const waiter = waiting.shift();
    if (waiter) waiter(line);
    else lines.push(line);
  });
  const next = async (): Promise<Record<string, unknown>> => {
    const line =
      lines.shift() ??
      (await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${mode} fixture: no output within 60 s`)), 60_000);
        waiting.push((l) => {
          clearTimeout(timer);
          resolve(l);
        });
      }));
    return JSON.parse(line) as Record<string, unknown>;
  };
  return { child, pid: child.pid, next, exited };
}

/** Starts `hold` and returns once the child's group has both background sleeps running. */
async function holding(starter: string, env?: NodeJS.ProcessEnv): Promise<{ holder: Holder; pgid: number; members: number[]; watchdog: number }> {
  const dir = freshDir();
  const holder = startHolder(starter, "hold", dir, env);
  const first = await holder.next();
  const pgid = first.pgid as number;
  leftovers.add(pgid);
  await waitUntil("both background sleeps to start", () => pidsInLog(join(dir, "hold.log")).length === 2);
  const members = [pgid, ...pidsInLog(join(dir, "hold.log"))];
  assert.deepEqual(liveGroupMembers(pgid).sort(), [...members].sort(), "the leader and both sleeps are in the group");
  assert.deepEqual(first.watchdogs, watchdogsOf(holder.pid), "one watchdog, started with the first child");
  assert.equal((first.watchdogs as number[]).length, 1);
  return { holder, pgid, members, watchdog: (first.watchdogs as number[])[0] };
}

/** The `release` fixture: one group kept registered, one released while it still runs. */
async function releasedIsSpared(starter: string, env?: NodeJS.ProcessEnv): Promise<void> {
  const holder = startHolder(starter, "release", freshDir(), env);
  const fact = await holder.next();
  const kept = fact.kept as number;
  const released = fact.released as number;
  leftovers.add(kept);
  leftovers.add(released);
  const [watchdog] = fact.watchdogs as number[];
  assert.ok(alive(kept) && alive(released));
  holder.child.kill("SIGKILL");
  await holder.exited;
  await waitUntil(`watchdog ${watchdog} to exit`, () => !alive(watchdog));
  assert.ok(!alive(kept), "the registered group was killed");
  assert.ok(alive(released), "the released group was left alone");
  assert.deepEqual(liveGroupMembers(released), [released]);
  process.kill(-released, "SIGKILL");
}

// The tests of a block run side by side: each has its own holder, groups and directory, and most
// of their time is spent waiting for processes to die.
const SIDE_BY_SIDE = { concurrency: true };

for (const starter of ["native", "node"] as const) {
  describe(`child watchdog, starter: ${starter}`, SIDE_BY_SIDE, () => {
    test("SIGKILL of the process that ran the child takes the child's whole group down, and the watchdog exits", OPTIONS, async () => {
      const { holder, pgid, members, watchdog } = await holding(starter);
      holder.child.kill("SIGKILL");
      assert.deepEqual(await holder.exited, { code: null, signal: "SIGKILL" });
      await waitUntil(`process group ${pgid} to be empty`, () => liveGroupMembers(pgid).length === 0);
      for (const pid of members) assert.ok(!alive(pid) || Number(procStat(pid)?.[2]) !== pgid, `member ${pid} survived`);
      await waitUntil(`watchdog ${watchdog} to exit`, () => !alive(watchdog));
    });

    test("a released group is not signalled when the process dies; a registered one is", OPTIONS, async () => {
      await releasedIsSpared(starter);
    });

    for (const replaced of [false, true]) {
      test(`a group registered twice and released once stays guarded${replaced ? ", also by a replacement watchdog" : ""}`, OPTIONS, async () => {
        const holder = startHolder(starter, "recount", freshDir(), process.env, replaced ? ["replace"] : []);
        const fact = await holder.next();
        const pgid = fact.pgid as number;
        leftovers.add(pgid);
        const [watchdog] = fact.watchdogs as number[];
        assert.ok(alive(pgid));
        holder.child.kill("SIGKILL");
        await holder.exited;
        await waitUntil(`process group ${pgid} to be empty`, () => liveGroupMembers(pgid).length === 0);
        await waitUntil(`watchdog ${watchdog} to exit`, () => !alive(watchdog));
      });
    }

    test("Ctrl-C to the process's group does not reach the watchdog, which still guards the child", OPTIONS, async () => {
      const { holder, pgid, watchdog } = await holding(starter);
      // As a terminal does: SIGINT to the foreground process group (the fixture ignores it).
      process.kill(-holder.pid, "SIGINT");
      const noted = await holder.next();
      assert.deepEqual(noted, { sigint: true, watchdogs: [watchdog] }, "the same watchdog is still running");
      assert.ok(liveGroupMembers(pgid).length > 0, "the child is in a group of its own, untouched by the Ctrl-C");
      holder.child.kill("SIGKILL");
      await holder.exited;
      await waitUntil(`process group ${pgid} to be empty`, () => liveGroupMembers(pgid).length === 0);
      await waitUntil(`watchdog ${watchdog} to exit`, () => !alive(watchdog));
    });

    test("a watchdog killed while children run is replaced by one that knows them", OPTIONS, async () => {
      const { holder, pgid, watchdog } = await holding(starter);
      // A watchdog that lived under a second is only replaced at the next start; this one is older.
      await new Promise((resolve) => setTimeout(resolve, 1200));
      process.kill(watchdog, "SIGKILL");
      let replacement = 0;
      await waitUntil("a new watchdog", () => {
        const now = watchdogsOf(holder.pid).filter((p) => p !== watchdog);
        replacement = now[0] ?? 0;
        return now.length === 1;
      });
      assert.ok(liveGroupMembers(pgid).length === 3, "killing the watchdog left the child alone");
      holder.child.kill("SIGKILL");
      await holder.exited;
      await waitUntil(`process group ${pgid} to be empty`, () => liveGroupMembers(pgid).length === 0);
      await waitUntil(`watchdog ${replacement} to exit`, () => !alive(replacement));
    });

    test("a process whose children are done exits on its own, and its watchdog with it", OPTIONS, async () => {
      const holder = startHolder(starter, "exit", freshDir());
      const fact = await holder.next();
      assert.equal((fact.result as { outcome: string }).outcome, "complete");
      const watchdogs = fact.watchdogs as number[];
      assert.equal(watchdogs.length, 1, "a watchdog was running");
      assert.deepEqual(await holder.exited, { code: 0, signal: null }, "nothing kept the event loop alive");
      await waitUntil(`watchdog ${watchdogs[0]} to exit`, () => !alive(watchdogs[0]));
    });
  });
}

describe("child watchdog of the Node starter on a system without awk", SIDE_BY_SIDE, () => {
  // PATH holds sh and sleep only, so the watchdog reads its pipe with the shell's own loop.
  const env = (): NodeJS.ProcessEnv => {
    const bin = join(freshDir(), "bin");
    mkdirSync(bin);
    for (const tool of ["sh", "sleep"]) symlinkSync(whichTool(tool), join(bin, tool));
    return { ...process.env, PATH: bin };
  };

  test("SIGKILL of the process takes the child's whole group down", OPTIONS, async () => {
    const { holder, pgid, watchdog } = await holding("node", env());
    holder.child.kill("SIGKILL");
    await holder.exited;
    await waitUntil(`process group ${pgid} to be empty`, () => liveGroupMembers(pgid).length === 0);
    await waitUntil(`watchdog ${watchdog} to exit`, () => !alive(watchdog));
  });

  test("a released group is not signalled when the process dies; a registered one is", OPTIONS, async () => {
    await releasedIsSpared("node", env());
  });
});

function whichTool(name: string): string {
  for (const dir of (process.env.PATH ?? "").split(":")) {
    const path = join(dir || ".", name);
    if (existsSync(path)) return path;
  }
  throw new Error(`${name} is not on PATH`);
}
