import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { RefusedError } from "../../src/errors.ts";
import {
  CampaignLock,
  describeHolder,
  lockPath,
  readLock,
  refuseIfRemoteCampaign,
  type LockHolder,
} from "../../src/lock/campaign-lock.ts";
import { claimPathFor } from "../../src/lock/lock-file.ts";
import { scratchDirs } from "../helpers/scratch.ts";

const HOST = hostname();
const CHILD = fileURLToPath(new URL("../fixtures/lock/acquire-child.ts", import.meta.url));
const LINE_FORMAT = /^(\S+) (\d+) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (\S+) (\d+|-)\n$/;

const { freshDir } = scratchDirs("lock");

/** A pid that existed on this host and has exited (and been reaped). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  assert.equal(typeof child.pid, "number");
  return child.pid as number;
}

/** A live process on this host; the caller kills it. */
function sleeper(): ChildProcess {
  return spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], { stdio: "ignore" });
}

function writeLockLine(outDir: string, line: string, ageSeconds = 0): void {
  const path = lockPath(outDir);
  writeFileSync(path, line);
  const when = new Date(Date.now() - ageSeconds * 1000);
  utimesSync(path, when, when);
}

function refusal(fn: () => unknown): RefusedError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof RefusedError, `expected RefusedError, got ${String(err)}`);
    assert.equal(err.code, "refused");
    return err;
  }
  assert.fail("expected a RefusedError, nothing was thrown");
}

async function until(condition: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe("lock file", () => {
  it("holds one line HOST PID ISO-START MODE PORT and is created with its directory", () => {
    const out = join(freshDir(), "nested");
    const lock = CampaignLock.acquire(out, { command: "resweep" });
    try {
      assert.equal(lock.path, lockPath(out));
      assert.equal(lockPath(out), join(out, "fuzzfleet.lock"));
      const match = LINE_FORMAT.exec(readFileSync(lock.path, "utf8"));
      assert.ok(match, "lock line has the documented format");
      assert.deepEqual(match.slice(1).filter((_, i) => i !== 2), [HOST, String(process.pid), "resweep", "-"]);
      assert.ok(Math.abs(Date.parse(match[3]) - Date.now()) < 60_000, "start stamp is now, in UTC");
    } finally {
      lock.release();
    }
  });

  it("refuses a second acquire, naming the holder's host and pid, and leaves the lock alone", () => {
    const out = freshDir();
    const lock = CampaignLock.acquire(out, { command: "run" });
    try {
      const before = readFileSync(lock.path, "utf8");
      const err = refusal(() => CampaignLock.acquire(out, { command: "coordinate" }));
      assert.match(err.message, /^a run campaign is running on this host \(pid \d+, started /);
      assert.ok(err.message.includes(`pid ${process.pid}`));
      assert.ok(err.message.includes(`--force-unlock`));
      assert.ok(err.message.endsWith(`  (${lock.path})`));
      assert.equal(readFileSync(lock.path, "utf8"), before);
      const seenFromElsewhere = refusal(() => CampaignLock.acquire(out, { command: "run", hostname: "otherhost" }));
      assert.ok(seenFromElsewhere.message.includes(`on host ${HOST} (pid ${process.pid},`));
    } finally {
      lock.release();
    }
  });

  it("release deletes the file, is idempotent, and lets the next acquire in", () => {
    const out = freshDir();
    const lock = CampaignLock.acquire(out, { command: "run" });
    lock.release();
    assert.equal(existsSync(lock.path), false);
    lock.release();
    const next = CampaignLock.acquire(out, { command: "reset" });
    next.release();
    assert.deepEqual(readdirSync(out), []);
  });

  it("records the listening port with setPort", () => {
    const out = freshDir();
    const lock = CampaignLock.acquire(out, { command: "coordinate", port: 0 });
    try {
      assert.match(readFileSync(lock.path, "utf8"), / coordinate -\n$/);
      lock.setPort(43210);
      assert.match(readFileSync(lock.path, "utf8"), LINE_FORMAT);
      assert.match(readFileSync(lock.path, "utf8"), / coordinate 43210\n$/);
      const holder = readLock(out);
      assert.equal(holder?.port, 43210);
      assert.ok(describeHolder(holder as LockHolder).includes("coordinating on port 43210"));
    } finally {
      lock.release();
    }
    assert.equal(existsSync(lockPath(out)), false, "release still recognises the rewritten line as ours");
  });
});

describe("same-host liveness", () => {
  it("reclaims a lock naming this host and a dead pid without --force-unlock", () => {
    const out = freshDir();
    const pid = deadPid();
    writeLockLine(out, `${HOST} ${pid} 2026-07-25T11:52:33Z coordinate 9999\n`);
    assert.equal(readLock(out), null);
    const logged: string[] = [];
    const lock = CampaignLock.acquire(out, { command: "run", log: (l) => logged.push(l) });
    try {
      assert.match(readFileSync(lock.path, "utf8"), new RegExp(`^${HOST} ${process.pid} \\S+ run -\\n$`));
      assert.deepEqual(logged, []);
    } finally {
      lock.release();
    }
    assert.deepEqual(readdirSync(out), [], "no claim or temp file is left behind");
  });

  it("reclaims a lock naming this host and this very pid that this process does not hold (a restarted container's pid 1)", () => {
    const out = freshDir();
    writeLockLine(out, `${HOST} ${process.pid} 2026-07-25T11:52:33Z explore 9999\n`);
    assert.equal(readLock(out), null, "an earlier process with this pid left it");
    const lock = CampaignLock.acquire(out, { command: "explore" });
    try {
      assert.match(readFileSync(lock.path, "utf8"), new RegExp(`^${HOST} ${process.pid} \\S+ explore -\\n$`));
      assert.notEqual(readLock(out), null, "now held here, it is live");
      assert.throws(() => CampaignLock.acquire(out, { command: "run" }), RefusedError);
    } finally {
      lock.release();
    }
  });

  it("refuses a lock naming this host and a live pid", async () => {
    const out = freshDir();
    const holder = sleeper();
    try {
      writeLockLine(out, `${HOST} ${holder.pid} 2026-07-25T11:52:33Z explore -\n`, 3600);
      const seen = readLock(out);
      assert.deepEqual({ ...seen, ageSeconds: 0 }, {
        host: HOST, pid: holder.pid, started: "2026-07-25T11:52:33Z", command: "explore", port: null, ageSeconds: 0, local: true,
      });
      assert.ok((seen as LockHolder).ageSeconds >= 3590);
      const err = refusal(() => CampaignLock.acquire(out, { command: "run" }));
      assert.match(err.message, new RegExp(`^an explore campaign is running on this host \\(pid ${holder.pid},`));
      assert.ok(!err.message.includes("probably gone"), "only remote locks are presumed gone");
    } finally {
      holder.kill();
    }
  });

  it("treats a zombie pid as dead", { skip: !existsSync("/proc/self/stat") && "needs /proc" }, async () => {
    const out = freshDir();
    // The background child outlives the shell's exec into `sleep 60`, which never reaps it, so it
    // stays a zombie while the long sleep runs.
    const parent = spawn("sh", ["-c", "sleep 0.3 & echo $!; exec sleep 60"], { stdio: ["ignore", "pipe", "ignore"] });
    try {
      const [first] = await new Promise<string[]>((resolve) =>
        createInterface({ input: parent.stdout! }).once("line", (l) => resolve([l])),
      );
      const zombie = Number(first);
      const state = () => {
        const stat = readFileSync(`/proc/${zombie}/stat`, "utf8");
        return stat.slice(stat.lastIndexOf(")") + 2).charAt(0);
      };
      await until(() => state() === "Z", `pid ${zombie} to become a zombie`);
      assert.doesNotThrow(() => process.kill(zombie, 0), "signal 0 alone would call it alive");
      writeLockLine(out, `${HOST} ${zombie} 2026-07-25T11:52:33Z run -\n`);
      assert.equal(readLock(out), null);
      } finally {
      parent.kill();
    }
  });
});

describe("locks held by another host", () => {
  it("are never reclaimed automatically, even when the pid does not exist here", () => {
    const out = freshDir();
    const pid = deadPid();
    const line = `otherhost ${pid} 2026-07-25T11:52:33Z coordinate 9999\n`;
    writeLockLine(out, line, 10);
    const seen = readLock(out);
    assert.equal(seen?.host, "otherhost");
    assert.equal(seen?.local, false);
    const err = refusal(() => CampaignLock.acquire(out, { command: "coordinate" }));
    assert.match(err.message, new RegExp(`^a coordinate campaign is running on host otherhost \\(pid ${pid}, started 2026-07-25T11:52:33Z, coordinating on port 9999; lock touched \\d+s ago\\)\\n`));
    assert.ok(err.message.includes("Wait for it to finish, or rerun with --force-unlock"));
    assert.equal(readFileSync(lockPath(out), "utf8"), line);
  });

  it("are refused when old, with a hint that the owner is probably gone and --force-unlock", () => {
    const out = freshDir();
    const line = `otherhost ${process.pid} 2026-07-25T11:52:33Z run -\n`;
    writeLockLine(out, line, 3600);
    assert.ok((readLock(out) as LockHolder).ageSeconds >= 3590, "a lock from another host is returned however old");
    const err = refusal(() => CampaignLock.acquire(out, { command: "run" }));
    assert.match(err.message, /^a run campaign is running on host otherhost .*lock touched 1h00m ago\)\n/);
    assert.ok(err.message.includes("probably gone"));
    assert.ok(err.message.includes("never reclaimed automatically"));
    assert.ok(err.message.includes("--force-unlock"));
    assert.ok(err.message.includes(`(${lockPath(out)})`));
    assert.equal(readFileSync(lockPath(out), "utf8"), line);
  });

  it("are taken over with forceUnlock, which logs the takeover", () => {
    const out = freshDir();
    writeLockLine(out, `otherhost 4242 2026-07-25T11:52:33Z coordinate 9999\n`, 3600);
    const logged: string[] = [];
    const lock = CampaignLock.acquire(out, { command: "coordinate", forceUnlock: true, log: (l) => logged.push(l) });
    try {
      assert.deepEqual(logged, ["--force-unlock: taking over the lock from otherhost (pid 4242)"]);
      assert.match(readFileSync(lock.path, "utf8"), new RegExp(`^${HOST} ${process.pid} \\S+ coordinate -\\n$`));
      assert.equal(readLock(out)?.local, true);
    } finally {
      lock.release();
    }
    assert.deepEqual(readdirSync(out), []);
  });
});

describe("malformed locks", () => {
  for (const [what, content] of [
    ["empty", ""],
    ["a bare pid (old format)", "12345\n"],
    ["three fields", "otherhost 12345 2026-07-25T11:52:33Z\n"],
    ["a non-integer pid", "otherhost 12x45 2026-07-25T11:52:33Z run -\n"],
    ["pid 0", "otherhost 0 2026-07-25T11:52:33Z run -\n"],
  ] as const) {
    it(`are treated as absent: ${what}`, () => {
      const out = freshDir();
        writeLockLine(out, content);
      assert.equal(readLock(out), null);
      assert.doesNotThrow(() => refuseIfRemoteCampaign(out, "status"));
      const lock = CampaignLock.acquire(out, { command: "run" });
      assert.match(readFileSync(lock.path, "utf8"), LINE_FORMAT);
      lock.release();
    });
  }

  it("a directory where the lock should be is refused, not overwritten", () => {
    const out = freshDir();
    mkdirSync(lockPath(out), { recursive: true });
    assert.equal(readLock(out), null, "unreadable reads as no lock");
    const err = refusal(() => CampaignLock.acquire(out, { command: "run" }));
    assert.match(err.message, /cannot read the campaign lock .*fuzzfleet\.lock \(EISDIR\)/);
  });
});

describe("heartbeat", () => {
  it("touches the lock's mtime while held", async () => {
    const out = freshDir();
    const lock = CampaignLock.acquire(out, { command: "run", heartbeatMs: 50 });
    try {
      const old = new Date(Date.now() - 3600_000);
      utimesSync(lock.path, old, old);
      await until(() => Date.now() - statSync(lock.path).mtimeMs < 600_000, "the heartbeat to touch the lock");
      assert.ok((readLock(out) as LockHolder).ageSeconds < 600);
    } finally {
      lock.release();
    }
  });

  it("stops touching, and release does not delete, a lock someone else took over", async () => {
    const out = freshDir();
    const first = CampaignLock.acquire(out, { command: "run", heartbeatMs: 50 });
    const logged: string[] = [];
    const second = CampaignLock.acquire(out, {
      command: "run", forceUnlock: true, hostname: "otherhost", heartbeatMs: 3600_000, log: (l) => logged.push(l),
    });
    try {
      assert.deepEqual(logged, [`--force-unlock: taking over the lock from ${HOST} (pid ${process.pid})`]);
      const takenOver = readFileSync(lockPath(out), "utf8");
      assert.match(takenOver, /^otherhost /);
      const old = new Date(Date.now() - 3600_000);
      utimesSync(lockPath(out), old, old);
      await sleep(500);
      assert.ok(Date.now() - statSync(lockPath(out)).mtimeMs > 3000_000, "the first holder's heartbeat stopped");
      assert.throws(() => first.setPort(1234), (err: unknown) => err instanceof RefusedError && /no longer ours/.test(err.message));
      first.release();
      assert.equal(readFileSync(lockPath(out), "utf8"), takenOver);
    } finally {
      first.release();
      second.release();
    }
    assert.equal(existsSync(lockPath(out)), false);
  });
});

describe("describeHolder", () => {
  it("names the command, host, pid, start, port and heartbeat age", () => {
    const remote: LockHolder = {
      host: "otherhost", pid: 42, started: "2026-07-25T11:52:33Z", command: "coordinate", port: 9999, ageSeconds: 242, local: false,
    };
    assert.equal(
      describeHolder(remote),
      "a coordinate campaign is running on host otherhost (pid 42, started 2026-07-25T11:52:33Z, coordinating on port 9999; lock touched 4m02s ago)",
    );
    assert.equal(
      describeHolder({ ...remote, command: "run", port: null, ageSeconds: 7, local: true }),
      "a run campaign is running on this host (pid 42, started 2026-07-25T11:52:33Z; lock touched 7s ago)",
    );
    assert.match(describeHolder({ ...remote, command: "explore", ageSeconds: 7500 }), /^an explore campaign .*lock touched 2h05m ago\)$/);
  });

  it("words one-off commands as what they are, not as campaigns", () => {
    const local: LockHolder = { host: "h", pid: 42, started: "2026-07-25T11:52:33Z", command: "resweep", port: null, ageSeconds: 3, local: true };
    assert.equal(describeHolder(local), "a resweep is running on this host (pid 42, started 2026-07-25T11:52:33Z; lock touched 3s ago)");
    assert.match(describeHolder({ ...local, command: "reset" }), /^a reset is running on this host \(pid 42,/);
    assert.match(describeHolder({ ...local, command: "coordinate" }), /^a coordinate campaign is running on this host/);
  });
});

describe("refuseIfRemoteCampaign", () => {
  it("points at the coordinator when another host coordinates on a port", () => {
    const out = freshDir();
    writeLockLine(out, `otherhost 4242 2026-07-25T11:52:33Z coordinate 9999\n`);
    const err = refusal(() => refuseIfRemoteCampaign(out, "failures"));
    assert.equal(
      err.message.split("\n")[1],
      "  Ask the coordinator instead:  fuzzfleet failures --master otherhost:9999",
    );
    assert.match(err.message, /^a coordinate campaign is running on host otherhost \(pid 4242,/);
    assert.ok(!err.message.includes("--force-unlock"), "status, failures and export have no --force-unlock");
  });

  it("says to run the command on the holding host otherwise", () => {
    const out = freshDir();
    writeLockLine(out, `otherhost 4242 2026-07-25T11:52:33Z run -\n`);
    const err = refusal(() => refuseIfRemoteCampaign(out, "status"));
    assert.equal(err.message.split("\n")[1], "  That host's campaign owns this store; run 'fuzzfleet status' there.");
    assert.ok(!err.message.includes("--force-unlock"));
    assert.ok(!err.message.includes("--master"));
  });

  it("never suggests --master for export, which has none", () => {
    const out = freshDir();
    writeLockLine(out, `otherhost 4242 2026-07-25T11:52:33Z coordinate 9999\n`);
    const err = refusal(() => refuseIfRemoteCampaign(out, "export"));
    assert.equal(
      err.message.split("\n")[1],
      "  That host's campaign owns this store, and 'export' cannot ask it remotely: run 'fuzzfleet export' on otherhost, or here once that campaign ends.",
    );
    assert.ok(!err.message.includes("--master"));
  });

  it("lets the command proceed beside this host's campaign or with no campaign", () => {
    const out = freshDir();
    assert.doesNotThrow(() => refuseIfRemoteCampaign(out, "status"));
    const lock = CampaignLock.acquire(out, { command: "coordinate", port: 9999 });
    try {
      assert.doesNotThrow(() => refuseIfRemoteCampaign(out, "export"));
      assert.throws(() => refuseIfRemoteCampaign(out, "export", { hostname: "otherhost" }), RefusedError);
    } finally {
      lock.release();
    }
  });
});

describe("claims", () => {
  it("a claim left by a dead process does not block reclaiming a dead lock", () => {
    const out = freshDir();
    const stale = `${HOST} ${deadPid()} 2026-07-25T11:52:33Z run -\n`;
    writeLockLine(out, stale);
    writeFileSync(claimPathFor(lockPath(out), stale), `${HOST} ${deadPid()} 2026-07-25T11:52:34Z claim -\n`);
    const lock = CampaignLock.acquire(out, { command: "run" });
    lock.release();
    assert.deepEqual(readdirSync(out), []);
  });

  it("a claim held by a live process makes acquire wait, then refuse", () => {
    const out = freshDir();
    const stale = `${HOST} ${deadPid()} 2026-07-25T11:52:33Z run -\n`;
    writeLockLine(out, stale);
    writeFileSync(claimPathFor(lockPath(out), stale), `${HOST} ${process.pid} 2026-07-25T11:52:34Z claim -\n`);
    const err = refusal(() => CampaignLock.acquire(out, { command: "run" }));
    assert.match(err.message, /kept changing the campaign lock/);
    assert.equal(readFileSync(lockPath(out), "utf8"), stale);
  });
});

interface Contender {
  child: ChildProcess;
  next(): Promise<string>;
}

function startContender(out: string): Contender {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, out], { stdio: ["pipe", "pipe", "inherit"] });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const waiter = waiting.shift();
    if (waiter) waiter(line);
    else lines.push(line);
  });
  return {
    child,
    next: () => {
      const line = lines.shift();
      return line !== undefined ? Promise.resolve(line) : new Promise((resolve) => waiting.push(resolve));
    },
  };
}

/** Several processes try to acquire at the same instant, `rounds` times; `prepare` sets up each round. */
async function race(prepare: (out: string) => void, contenders = 3, rounds = 8): Promise<void> {
  const out = freshDir();
  const all = Array.from({ length: contenders }, () => startContender(out));
  try {
    for (const c of all) assert.equal(await c.next(), "ready");
    for (let round = 0; round < rounds; round++) {
      prepare(out);
      const startAt = Date.now() + 150;
      for (const c of all) c.child.stdin!.write(`acquire ${startAt}\n`);
      const results = await Promise.all(all.map((c) => c.next()));
      assert.equal(results.filter((r) => r === "won").length, 1, `round ${round}: exactly one winner (got ${results.join(", ")})`);
      assert.equal(results.filter((r) => r === "refused").length, contenders - 1, `round ${round}: ${results.join(", ")}`);
      const winner = all[results.indexOf("won")];
      assert.match(readFileSync(lockPath(out), "utf8"), new RegExp(`^${HOST} ${winner.child.pid} `));
      winner.child.stdin!.write("release\n");
      assert.equal(await winner.next(), "released");
      assert.deepEqual(readdirSync(out), [], "no lock, claim or temp file is left behind");
    }
  } finally {
    for (const c of all) c.child.kill();
  }
}

describe("racing processes", { timeout: 120_000 }, () => {
  it("exactly one of several processes acquiring a fresh directory wins", async () => {
    await race(() => {});
  });

  it("exactly one of several processes reclaiming a dead same-host lock wins", async () => {
    const stalePid = deadPid();
    await race((out) => writeLockLine(out, `${HOST} ${stalePid} 2026-07-25T11:52:33Z run -\n`));
  });
});
