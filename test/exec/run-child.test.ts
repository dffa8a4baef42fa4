import assert from "node:assert/strict";
import { accessSync, chmodSync, constants, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { getPriority } from "node:os";
import { delimiter, join } from "node:path";
import { before, describe, test, type TestContext } from "node:test";

import { defaultStarter, nativeStarterProblem, type Starter } from "../../src/exec/native-spawn.ts";
import { runChild as runChildWith, type RunChildOptions } from "../../src/exec/run-child.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const LINUX_PROC = existsSync("/proc/self/stat");
const TEST_TIMEOUT = { timeout: 60_000 };

const { freshDir } = scratchDirs("exec");

// Every behaviour below is checked with both process starters (see src/exec/native-spawn.ts);
// each starter gets its own directory, and runChild is bound to the starter under test.
let dir: string;
let starter: Starter;
const runChild = (options: RunChildOptions) => runChildWith({ starter, ...options });

/** Fields of /proc/<pid>/stat from field 3 (state) on, or null if the process is gone. */
function procStat(pid: number): string[] | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "latin1");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  } catch {
    return null;
  }
}

/** Non-zombie processes whose process group is `pgid`, read independently of the code under test. */
function liveGroupMembers(pgid: number): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => {
      const fields = procStat(pid);
      return fields !== null && Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X";
    });
}

/** True if `pid` is still a live process of group `pgid` (not gone, not a zombie, not reused). */
function aliveInGroup(pid: number, pgid: number): boolean {
  const fields = procStat(pid);
  return fields !== null && Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X";
}

/** Registers a last-resort SIGKILL of the group so a failing test leaves nothing running. */
function killGroupAfter(t: TestContext, getPgid: () => number | undefined): void {
  t.after(() => {
    const pgid = getPgid();
    if (pgid === undefined) return;
    try {
      process.kill(-pgid, "SIGKILL");
    } catch {
      // already gone
    }
  });
}

function pidsInLog(logPath: string): number[] {
  return readFileSync(logPath, "utf8")
    .split("\n")
    .filter((line) => /^\d+$/.test(line))
    .map(Number);
}

function onPath(name: string): boolean {
  return (process.env.PATH ?? "").split(delimiter).some((d) => {
    try {
      accessSync(join(d, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

for (const which of ["native", "node"] as const) {
  describe(`starter: ${which}`, () => {
    before(() => {
      starter = which;
      dir = freshDir();
    });

    test("a child that exits on its own is complete with its exit code; stdout and stderr are appended to the log", TEST_TIMEOUT, async () => {
      const logPath = join(dir, "exit", "nested", "codes.log");
      for (const code of [0, 1, 7]) {
        const result = await runChild({
          argv: ["sh", "-c", `echo out-${code}; echo err-${code} >&2; exit ${code}`],
          logPath,
          hardTimeoutMs: 30_000,
        });
        assert.equal(result.outcome, "complete");
        assert.equal(result.exitCode, code);
        assert.equal(result.signal, null);
        assert.equal(result.error, undefined);
        assert.ok(Number.isFinite(result.seconds) && result.seconds >= 0);
      }
      const lines = readFileSync(logPath, "utf8").trim().split("\n").sort();
      assert.deepEqual(lines, ["err-0", "err-1", "err-7", "out-0", "out-1", "out-7"]);
    });

    test("on the hard timeout the whole group is terminated: outcome timeout and no member survives", { ...TEST_TIMEOUT, skip: !LINUX_PROC && "needs /proc" }, async (t) => {
      const logPath = join(dir, "timeout.log");
      let pgid: number | undefined;
      killGroupAfter(t, () => pgid);
      const result = await runChild({
        argv: ["sh", "-c", "sleep 30 & echo $!; sleep 30 & echo $!; wait"],
        logPath,
        hardTimeoutMs: 300,
        killGraceMs: 10_000,
        onSpawn: (pid) => (pgid = pid),
      });
      assert.equal(result.outcome, "timeout");
      assert.equal(result.exitCode, null);
      assert.equal(result.signal, "SIGTERM");
      assert.ok(pgid !== undefined);
      const grandchildren = pidsInLog(logPath);
      assert.equal(grandchildren.length, 2, "both background sleeps had started");
      for (const pid of grandchildren) assert.ok(!aliveInGroup(pid, pgid), `grandchild ${pid} is still alive`);
      assert.deepEqual(liveGroupMembers(pgid), []);
    });

    test("a group that ignores SIGTERM is SIGKILLed after killGraceMs", { ...TEST_TIMEOUT, skip: !LINUX_PROC && "needs /proc" }, async (t) => {
      const logPath = join(dir, "ignore-term.log");
      let pgid: number | undefined;
      killGroupAfter(t, () => pgid);
      // An ignored signal stays ignored across fork and exec, so the sleeps ignore SIGTERM too.
      const result = await runChild({
        argv: ["sh", "-c", "trap '' TERM; sleep 30 & echo $!; sleep 30"],
        logPath,
        hardTimeoutMs: 300,
        killGraceMs: 300,
        onSpawn: (pid) => (pgid = pid),
      });
      assert.equal(result.outcome, "timeout");
      assert.equal(result.signal, "SIGKILL");
      assert.equal(result.exitCode, null);
      assert.ok(pgid !== undefined);
      const [grandchild] = pidsInLog(logPath);
      assert.ok(grandchild !== undefined, "the background sleep had started");
      assert.ok(!aliveInGroup(grandchild, pgid));
      assert.deepEqual(liveGroupMembers(pgid), []);
    });

    test("aborting the signal mid-run interrupts the child and clears its group", { ...TEST_TIMEOUT, skip: !LINUX_PROC && "needs /proc" }, async (t) => {
      const logPath = join(dir, "abort.log");
      const controller = new AbortController();
      let pgid: number | undefined;
      killGroupAfter(t, () => pgid);
      const result = await runChild({
        argv: ["sh", "-c", "sleep 30 & echo $!; sleep 30 & echo $!; wait"],
        logPath,
        hardTimeoutMs: 30_000,
        killGraceMs: 10_000,
        signal: controller.signal,
        onSpawn: (pid) => {
          pgid = pid;
          // Abort once both sleeps are running, so the group has grandchildren to clear.
          const poll = setInterval(() => {
            if (existsSync(logPath) && pidsInLog(logPath).length === 2) {
              clearInterval(poll);
              controller.abort();
            }
          }, 20);
        },
      });
      assert.equal(result.outcome, "interrupted");
      assert.equal(result.signal, "SIGTERM");
      assert.ok(pgid !== undefined);
      for (const pid of pidsInLog(logPath)) assert.ok(!aliveInGroup(pid, pgid), `grandchild ${pid} is still alive`);
      assert.deepEqual(liveGroupMembers(pgid), []);
    });

    test("an already-aborted signal returns interrupted without starting anything", TEST_TIMEOUT, async () => {
      const logPath = join(dir, "pre-aborted", "never.log");
      let spawned = false;
      const result = await runChild({
        argv: ["sh", "-c", "echo should-not-run"],
        logPath,
        hardTimeoutMs: 30_000,
        signal: AbortSignal.abort(),
        onSpawn: () => (spawned = true),
      });
      assert.deepEqual(result, { outcome: "interrupted", exitCode: null, signal: null, seconds: 0 });
      assert.equal(spawned, false);
      assert.equal(existsSync(logPath), false);
    });

    test("a leader that exits normally leaves no background grandchild behind", { ...TEST_TIMEOUT, skip: !LINUX_PROC && "needs /proc" }, async (t) => {
      const logPath = join(dir, "orphan.log");
      let pgid: number | undefined;
      killGroupAfter(t, () => pgid);
      const result = await runChild({
        argv: ["sh", "-c", "sleep 30 & echo $!; exit 0"],
        logPath,
        hardTimeoutMs: 30_000,
        killGraceMs: 10_000,
        onSpawn: (pid) => (pgid = pid),
      });
      assert.equal(result.outcome, "complete");
      assert.equal(result.exitCode, 0);
      assert.ok(pgid !== undefined);
      const [grandchild] = pidsInLog(logPath);
      assert.ok(grandchild !== undefined);
      assert.ok(!aliveInGroup(grandchild, pgid), `grandchild ${grandchild} is still alive`);
      assert.deepEqual(liveGroupMembers(pgid), []);
    });

    test("a grandchild that ignores SIGTERM after a normal exit is SIGKILLed after killGraceMs", { ...TEST_TIMEOUT, skip: !LINUX_PROC && "needs /proc" }, async (t) => {
      const logPath = join(dir, "orphan-ignore-term.log");
      let pgid: number | undefined;
      killGroupAfter(t, () => pgid);
      const result = await runChild({
        argv: ["sh", "-c", "trap '' TERM; sleep 30 & echo $!; exit 3"],
        logPath,
        hardTimeoutMs: 30_000,
        killGraceMs: 200,
        onSpawn: (pid) => (pgid = pid),
      });
      assert.equal(result.outcome, "complete");
      assert.equal(result.exitCode, 3);
      assert.ok(pgid !== undefined);
      const [grandchild] = pidsInLog(logPath);
      assert.ok(grandchild !== undefined);
      assert.ok(!aliveInGroup(grandchild, pgid), `grandchild ${grandchild} is still alive`);
      assert.deepEqual(liveGroupMembers(pgid), []);
    });

    test("nice sets the child's niceness right after spawn", { ...TEST_TIMEOUT, skip: !LINUX_PROC && "needs /proc" }, async () => {
      assert.notEqual(getPriority(), 7, "the test needs a parent niceness other than 7");
      let childNice: number | undefined;
      const result = await runChild({
        argv: ["sh", "-c", "exit 0"],
        logPath: join(dir, "nice.log"),
        hardTimeoutMs: 30_000,
        nice: 7,
        // onSpawn runs after setPriority and before the leader can be reaped, so its stat is readable.
        onSpawn: (pid) => (childNice = Number(procStat(pid)?.[16])),
      });
      assert.equal(result.outcome, "complete");
      assert.equal(childNice, 7);
    });

    test("idleIo runs the child in the idle I/O class", TEST_TIMEOUT, async (t) => {
      const logPath = join(dir, "idle-io.log");
      const result = await runChild({
        argv: ["sh", "-c", "ionice 2>/dev/null || echo no-ionice; echo args: \"$@\"", "sh", "a b", "c"],
        logPath,
        hardTimeoutMs: 30_000,
        idleIo: true,
      });
      assert.equal(result.outcome, "complete");
      assert.equal(result.exitCode, 0);
      const lines = readFileSync(logPath, "utf8").trim().split("\n");
      assert.equal(lines.at(-1), "args: a b c", "arguments reach the program unchanged through the wrapper");
      if (!onPath("ionice")) {
        t.skip("ionice is not on PATH, so the I/O class cannot be set or read");
        return;
      }
      assert.match(lines[0], /^idle/);
    });

    test("a missing program resolves with outcome error naming it, with and without idleIo", TEST_TIMEOUT, async () => {
      for (const idleIo of [false, true]) {
        let spawned = false;
        const result = await runChild({
          argv: ["fuzzfleet-no-such-program", "x"],
          logPath: join(dir, "missing.log"),
          hardTimeoutMs: 30_000,
          idleIo,
          onSpawn: () => (spawned = true),
        });
        assert.equal(result.outcome, "error", `idleIo=${idleIo}`);
        assert.equal(result.exitCode, null);
        assert.equal(result.signal, null);
        assert.match(result.error ?? "", /'fuzzfleet-no-such-program'.*ENOENT/);
        assert.equal(spawned, false);
      }
    });

    test("a file that is not executable resolves with outcome error (EACCES)", TEST_TIMEOUT, async () => {
      const script = join(dir, "not-executable.sh");
      writeFileSync(script, "#!/bin/sh\nexit 0\n");
      chmodSync(script, 0o644);
      for (const idleIo of [false, true]) {
        const result = await runChild({ argv: [script], logPath: join(dir, "eacces.log"), hardTimeoutMs: 30_000, idleIo });
        assert.equal(result.outcome, "error", `idleIo=${idleIo}`);
        assert.ok(result.error?.includes(script), result.error);
        assert.match(result.error ?? "", /EACCES/);
      }
    });

    test("a missing working directory or stdin file resolves with outcome error naming it", TEST_TIMEOUT, async () => {
      const missingDir = join(dir, "no-such-dir");
      const noCwd = await runChild({ argv: ["true"], cwd: missingDir, logPath: join(dir, "cwd.log"), hardTimeoutMs: 30_000 });
      assert.equal(noCwd.outcome, "error");
      assert.ok(noCwd.error?.includes(missingDir), noCwd.error);

      const missingInput = join(dir, "no-such-input");
      const noInput = await runChild({ argv: ["cat"], stdin: missingInput, logPath: join(dir, "stdin-missing.log"), hardTimeoutMs: 30_000 });
      assert.equal(noInput.outcome, "error");
      assert.ok(noInput.error?.includes(missingInput), noInput.error);
    });

    test("stdin from a file is delivered; without it the child reads an empty stdin", TEST_TIMEOUT, async () => {
      const input = join(dir, "input.bin");
      writeFileSync(input, "first line\nsecond line\n");
      const fed = join(dir, "stdin.log");
      const result = await runChild({ argv: ["cat"], stdin: input, logPath: fed, hardTimeoutMs: 30_000 });
      assert.equal(result.outcome, "complete");
      assert.equal(result.exitCode, 0);
      assert.equal(readFileSync(fed, "utf8"), "first line\nsecond line\n");

      const empty = join(dir, "stdin-ignored.log");
      const ignored = await runChild({ argv: ["sh", "-c", "wc -c"], logPath: empty, hardTimeoutMs: 30_000 });
      assert.equal(ignored.outcome, "complete");
      assert.equal(readFileSync(empty, "utf8").trim(), "0");
    });

    test("the working directory and environment are passed to the child", TEST_TIMEOUT, async () => {
      const logPath = join(dir, "cwd-env.log");
      const result = await runChild({
        argv: ["sh", "-c", "pwd; echo \"$FUZZFLEET_TEST_VALUE\""],
        cwd: dir,
        env: { ...process.env, FUZZFLEET_TEST_VALUE: "from-env" },
        logPath,
        hardTimeoutMs: 30_000,
      });
      assert.equal(result.outcome, "complete");
      const [cwdLine, envLine] = readFileSync(logPath, "utf8").trim().split("\n");
      assert.equal(realpathSync(cwdLine), realpathSync(dir));
      assert.equal(envLine, "from-env");
    });

    test("the child leads its own session and has no signal ignored or blocked; from the native starter it inherits only 0, 1 and 2", { ...TEST_TIMEOUT, skip: !LINUX_PROC && "needs /proc" }, async () => {
      // Node itself ignores SIGPIPE and keeps descriptors of its own open; none of that may leak.
      const logPath = join(dir, "world.log");
      let stat: string[] | null = null;
      let leader = 0;
      const result = await runChild({
        argv: ["sh", "-c", "grep -E '^Sig(Ign|Blk):' /proc/self/status; ls /proc/$$/fd"],
        logPath,
        hardTimeoutMs: 30_000,
        onSpawn: (pid) => {
          leader = pid;
          stat = procStat(pid);
        },
      });
      assert.equal(result.outcome, "complete");
      assert.ok(stat, "the leader's stat was readable at onSpawn");
      const [, , pgrp, session] = stat as string[];
      const lines = readFileSync(logPath, "utf8").trim().split("\n");
      assert.deepEqual(lines.slice(0, 2), ["SigBlk:\t0000000000000000", "SigIgn:\t0000000000000000"]);
      // child_process leaves open whatever descriptor Node's parent gave it without close-on-exec.
      if (starter === "native") assert.deepEqual(lines.slice(2).sort(), ["0", "1", "2"], "only the standard descriptors are open in the child");
      assert.deepEqual([Number(pgrp), Number(session)], [leader, leader], "the child leads its process group and session");
    });

    test("a bare program name is looked up in the PATH of the given environment", TEST_TIMEOUT, async () => {
      const bin = join(dir, "own-bin");
      mkdirSync(bin);
      const program = join(bin, "fuzzfleet-own-tool");
      writeFileSync(program, "#!/bin/sh\necho own-tool ran\n");
      chmodSync(program, 0o755);
      const logPath = join(dir, "path.log");
      const env = { ...process.env, PATH: `${join(dir, "no-such-dir")}${delimiter}${bin}${delimiter}${process.env.PATH}` };
      const result = await runChild({ argv: ["fuzzfleet-own-tool"], env, logPath, hardTimeoutMs: 30_000 });
      assert.equal(result.outcome, "complete", result.error);
      assert.equal(readFileSync(logPath, "utf8"), "own-tool ran\n");
      const without = await runChild({ argv: ["fuzzfleet-own-tool"], logPath, hardTimeoutMs: 30_000 });
      assert.equal(without.outcome, "error");
      assert.match(without.error ?? "", /ENOENT/);
    });

    test("logPath null gives the child a working sink for its output and keeps nothing", TEST_TIMEOUT, async () => {
      const before = readdirSync(dir).length;
      const result = await runChild({ argv: ["sh", "-c", "echo out || exit 9; echo err >&2 || exit 8; exit 4"], logPath: null, hardTimeoutMs: 30_000 });
      assert.equal(result.outcome, "complete");
      assert.equal(result.exitCode, 4, "writes to stdout and stderr succeeded");
      assert.equal(readdirSync(dir).length, before);
    });

    test("an argument, a working directory or an environment value with a NUL byte is an error outcome, nothing starts", TEST_TIMEOUT, async () => {
      const logPath = join(dir, "nul.log");
      const cases: Partial<RunChildOptions>[] = [
        { argv: ["sh", "-c", "exit 0", "a\0b"] },
        { argv: ["true"], cwd: `${dir}\0x` },
        { argv: ["true"], env: { ...process.env, FUZZFLEET_NUL: "a\0b" } },
      ];
      for (const extra of cases) {
        let spawned = false;
        const result = await runChild({ argv: ["true"], logPath, hardTimeoutMs: 30_000, onSpawn: () => (spawned = true), ...extra });
        assert.equal(result.outcome, "error", JSON.stringify(extra.argv));
        assert.match(result.error ?? "", /NUL|null bytes/);
        assert.equal(spawned, false);
      }
    });

    test("a child killed by a signal reports the signal's name", TEST_TIMEOUT, async () => {
      const result = await runChild({ argv: ["sh", "-c", "kill -USR1 $$"], logPath: join(dir, "signal.log"), hardTimeoutMs: 30_000 });
      assert.equal(result.outcome, "complete");
      assert.equal(result.exitCode, null);
      assert.equal(result.signal, "SIGUSR1");
    });
  });
}

test("the native starter is built and usable here, and is the default", () => {
  // A missing build would otherwise only show as slower runs through the fallback.
  assert.equal(nativeStarterProblem(), null);
  const saved = process.env.FUZZFLEET_SPAWN;
  try {
    delete process.env.FUZZFLEET_SPAWN;
    assert.equal(defaultStarter(), "native");
    process.env.FUZZFLEET_SPAWN = "node";
    assert.equal(defaultStarter(), "node");
    process.env.FUZZFLEET_SPAWN = "fork";
    assert.throws(() => defaultStarter(), /FUZZFLEET_SPAWN must be 'native' or 'node' \(got 'fork'\)/);
  } finally {
    if (saved === undefined) delete process.env.FUZZFLEET_SPAWN;
    else process.env.FUZZFLEET_SPAWN = saved;
  }
});
