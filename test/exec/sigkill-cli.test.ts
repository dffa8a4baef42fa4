// Invariant 10 through the real CLI: `run`, and `worker` attached to a real `coordinate` on
// 127.0.0.1, are SIGKILLed in the middle of a chunk, and `explore` in the middle of a target run,
// with both process starters. The generator (the bundled planted one, with its worker pool,
// hanging mid-chunk) or the target, and a background process it started, must be gone shortly
// after, though nothing of fuzzfleet is left to stop them.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { describe, test } from "node:test";

import { exitOwed } from "../helpers/books.ts";
import { Campaign, distributedTable, PLANTED, start, startCoordinator, waitFor, type Running } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { procStat, watchdogsOf } from "./fixtures/processes.ts";

const OPTIONS = { timeout: 180_000 };
const MARK = "FUZZFLEET_TEST_CHILD_MARK";

interface Seen {
  pid: number;
  cmdline: string[];
}

/** Live processes other than `except` whose environment carries MARK=mark (children inherit it). */
function marked(mark: string, except: number): Seen[] {
  const needle = `\0${MARK}=${mark}\0`;
  const found: Seen[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === except) continue;
    try {
      if (!`\0${readFileSync(`/proc/${name}/environ`, "latin1")}`.includes(needle)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "latin1");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (state === "Z" || state === "X") continue;
      found.push({ pid: Number(name), cmdline: readFileSync(`/proc/${name}/cmdline`, "latin1").split("\0").filter(Boolean) });
    } catch {
      // gone while we looked, or not ours to read
    }
  }
  return found;
}

function killMarked(mark: string): void {
  for (const { pid } of marked(mark, -1)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

/**
 * A campaign whose generator is the planted one (2 pool workers) behind a shell that first starts
 * a background `sleep`, so the chunk's process group has a member the generator does not wait for.
 */
function campaign(extra = ""): { c: Campaign; mark: string } {
  const command = ["sh", "-c", 'sleep 300 & exec node "$0" "$@"', PLANTED, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}"];
  const c = new Campaign({
    generator: `[generator]\ncommand = ${JSON.stringify(command)}\nidentity = [${JSON.stringify(PLANTED)}]\n`,
    defaults: { jobs: 2, bootstrap_seeds: 100 },
    extra,
  });
  const mark = randomBytes(8).toString("hex");
  // The first chunk (seeds 1..100) stops at seed 30 and waits there until it is killed.
  Object.assign(c.env, { [MARK]: mark, PLANTED_HANG_SEED: "30" });
  return { c, mark };
}

/** Waits until the child (whose command line names `program`) and its background sleep both run. */
async function midRun(mark: string, session: Pick<Running, "child" | "output">, program: string): Promise<Seen[]> {
  return waitFor(
    "the child and its background sleep to run",
    () => {
      if (session.child.exitCode !== null) throw new Error(`fuzzfleet exited early:\n${session.output()}`);
      const seen = marked(mark, session.child.pid!);
      const child = seen.some((p) => p.cmdline.includes(program));
      const sleeper = seen.some((p) => p.cmdline.join(" ") === "sleep 300");
      return child && sleeper ? seen : undefined;
    },
    60_000,
    50,
  );
}

/** SIGKILLs `session` and asserts that every process it started is gone, the watchdog included. */
async function killAndCheck(
  session: Pick<Running, "child">,
  ended: Promise<{ signal: NodeJS.Signals | null }>,
  mark: string,
  running: Seen[],
): Promise<void> {
  const pid = session.child.pid!;
  assert.equal(watchdogsOf(pid).length, 1, "a watchdog watches the session");
  session.child.kill("SIGKILL");
  const end = await ended;
  assert.equal(end.signal, "SIGKILL");
  await waitFor(
    "every process the session started to be gone",
    () => (marked(mark, pid).length === 0 ? true : undefined),
    30_000,
    50,
  ).catch((err: Error) => {
    // Enough to tell a group the watchdog never signalled from one it did: state, parent, group, session.
    const left = marked(mark, pid).map((p) => {
      const [state, ppid, pgid, sid] = procStat(p.pid) ?? [];
      return `${p.pid} (state ${state}, parent ${ppid}, group ${pgid}, session ${sid}): ${p.cmdline.join(" ")}`;
    });
    const watchdogs = watchdogsOf(pid).map((w) => `${w} (state ${procStat(w)?.[0]})`);
    throw new Error(`${err.message}; still running:\n${left.join("\n")}\n(were running: ${running.map((p) => p.pid).join(", ")}; watchdogs alive: ${watchdogs.join(", ") || "none"})`);
  });
  await waitFor("the watchdog to exit", () => (watchdogsOf(pid).length === 0 ? true : undefined), 30_000, 50);
}

for (const starter of ["native", "node"] as const) {
  describe(`SIGKILL mid-chunk, starter: ${starter}`, () => {
    test("`run` killed mid-chunk leaves no generator, pool worker or background child running", OPTIONS, async () => {
      const { c, mark } = campaign();
      try {
        const session = start(c, ["run", "--for", "5m"], { FUZZFLEET_SPAWN: starter });
        const running = await midRun(mark, session, PLANTED);
        await killAndCheck(session, session.result, mark, running);
      } finally {
        killMarked(mark);
        c.cleanup();
      }
    });

    test("`worker` killed mid-chunk leaves no generator, pool worker or background child running", OPTIONS, async () => {
      const { c, mark } = campaign(distributedTable({ lease: 20 }));
      let coordinator: (Running & { port: number }) | undefined;
      try {
        // Only the worker runs generators; the coordinator does not carry the mark.
        coordinator = await startCoordinator(c, ["--for", "5m"], { [MARK]: "" });
        const worker = start(c, ["worker", "--master", `127.0.0.1:${coordinator.port}`, "-j", "1"], { FUZZFLEET_SPAWN: starter });
        const running = await midRun(mark, worker, PLANTED);
        await killAndCheck(worker, worker.result, mark, running);
        coordinator.child.kill("SIGINT");
        const end = await coordinator.result;
        assert.equal(end.code, exitOwed(c, end.stdout), end.stdout + end.stderr);
      } finally {
        coordinator?.child.kill("SIGKILL");
        killMarked(mark);
        c.cleanup();
      }
    });

    test("`explore` killed mid-run leaves no target or background child running", OPTIONS, async () => {
      const x = new ExploreDir();
      const mark = randomBytes(8).toString("hex");
      try {
        x.seed("a", "seed a\n");
        const target = x.script("hanging-target", "sleep 300 &\nexec sleep 301");
        const session = x.start(["-j", "1", "-t", "600"], [target], { [MARK]: mark, FUZZFLEET_SPAWN: starter });
        const running = await midRun(mark, session, "301");
        await killAndCheck(session, session.done, mark, running);
      } finally {
        killMarked(mark);
        x.cleanup();
      }
    });
  });
}
