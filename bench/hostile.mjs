#!/usr/bin/env node
// hostile: what peers without the token cost a listening coordinator and an explore master.
//
// A real `fuzzfleet coordinate` (the planted generator) or `fuzzfleet explore --port -j 0` (an
// endless chain target) serves one honest `fuzzfleet worker -j 1` on 127.0.0.1. Then, level by
// level, hostile connections from this process attack it: each declares a 4 MiB first frame and
// sends 4 MiB - 1 bytes as fast as the server reads them, and comes back a second after it is
// refused; at the last level a flood of malformed frames (broken framing, broken JSON, wrong
// token, unknown types), one connection each, 50 at a time, comes on top. Level 0 is no attack.
//
// Per level: the server's resident memory (VmRSS sampled every 100 ms, its maximum; VmHWM, the
// peak since start, at the level's end), what the attack got (refused at accept, refused after
// reading the header, reset), and the honest worker's rate over the level (seeds/s of its chunks
// pro rata, or committed tasks/s) against level 0. The attacker shares the machine's CPU with
// the server: its CPU (and the server's) is shown beside the rate.
//
// Runs against the compiled CLI: `npm run build && node bench/hostile.mjs [--help]`.
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { benchmarkMain, CLI, epochMs, f0, f1, f2, int, parseOptions, parseShownSeconds, printTable, processCpuSeconds, sleep, startProcess } from "./common.mjs";
import { campaignToml } from "./planted.mjs";
import { besiege, flood, malformedFrames, memoryOf, outcomeOf, sendOnce } from "../test/net/attack.mjs";

const TARGET_MB = 150;
const TOKEN = "hostile-bench-token-0123456789abcdef";
/** A refused declarer comes back after this long. */
const RECONNECT_MS = 1000;
const FLOOD_CONCURRENCY = 50;

const HELP = `usage: node bench/hostile.mjs [options]

  --part P            coordinator, explore or both                            default both
  --connections LIST  hostile connections declaring 4 MiB, per level          default 0,100,400
  --malformed N       malformed frames added at the last level                default 10000
  --seconds S         length of a level (the last lasts until its flood ends) default 15
  --warmup S          seconds of honest work before the first level           default 5
  --cost-ms M         PLANTED_COST_MS of the honest sweep                     default 2`;

function options(argv) {
  return parseOptions(
    "hostile",
    argv,
    {
      part: { default: "both", choices: ["coordinator", "explore", "both"] },
      connections: { default: "0,100,400", number: { min: 0, max: 4000, integer: true }, list: true },
      malformed: { default: "10000", number: { min: 0, integer: true } },
      seconds: { default: "15", number: { min: 1 } },
      warmup: { default: "5", number: { min: 0 } },
      "cost-ms": { default: "2", number: { min: 0.01 } },
    },
    HELP,
  );
}

// ---------------------------------------------------------------------------------------------
// The attacker: the hostile suite's clients (test/net/attack.mjs), one implementation for both

function tally(answers) {
  const n = { "refused at accept": 0, refused: 0, reset: 0, "no reply": 0, "never connected": 0 };
  for (const a of answers) n[outcomeOf(a)]++;
  return n;
}

/**
 * One level: `connections` declarers (each back RECONNECT_MS after its refusal) for `seconds`,
 * plus `malformed` frames; memory sampled throughout; the honest rate over the level's window.
 */
async function level(server, { connections, malformed, seconds }) {
  const pid = server.pid;
  const startMs = epochMs();
  const serverCpu = processCpuSeconds(pid);
  const ownCpu = process.cpuUsage();
  const bodies = malformedFrames(TOKEN);
  const siege = await besiege(server.port, pid, { declarers: connections, reconnectMs: RECONNECT_MS }, async () => {
    const flooded = flood(malformed, FLOOD_CONCURRENCY, (i) => sendOnce(server.port, bodies[i % bodies.length], 60_000));
    await sleep(seconds * 1000);
    const floodAnswers = await flooded;
    // The window ends here, before the declarers are called off and their last refusals awaited.
    return { floodAnswers, endMs: epochMs(), serverCpuSeconds: processCpuSeconds(pid) - serverCpu, own: process.cpuUsage(ownCpu) };
  });
  const { floodAnswers, endMs, serverCpuSeconds, own } = siege.result;
  const memory = memoryOf(pid);
  return {
    connections,
    malformed: floodAnswers.length,
    startMs,
    endMs,
    seconds: (endMs - startMs) / 1000,
    /** CPU seconds per second of the server and of this process (the attacker). */
    serverCpu: serverCpuSeconds / ((endMs - startMs) / 1000),
    attackerCpu: (own.user + own.system) / 1e6 / ((endMs - startMs) / 1000),
    rssMaxMB: Math.max(siege.rssMaxMB, memory.rssMB),
    peakMB: memory.peakMB,
    declarers: tally(siege.declared),
    flood: tally(floodAnswers),
  };
}

// ---------------------------------------------------------------------------------------------
// The servers and their honest workers

/**
 * The honest worker's rate over [fromMs, toMs), from its timestamped output lines: for a sweep,
 * each recorded chunk's seeds pro rata of the part of its run (its start line to its completion
 * line) inside the window, so a 2 s chunk straddling an edge counts for what it did inside; for
 * explore, the tasks committed in the window.
 */
function honestRate(worker, kind) {
  return (fromMs, toMs) => {
    const seconds = (toMs - fromMs) / 1000;
    if (kind === "explore") {
      return worker.lines.filter((l) => l.at >= fromMs && l.at < toMs && l.line.endsWith("(committed)")).length / seconds;
    }
    let seeds = 0;
    for (const { at, line } of worker.lines) {
      // One line per chunk, once acknowledged: "chunk N: lane seeds a..b (n) — complete (rc 0) in 1.2s (recorded)";
      // the run is placed by its time before the line.
      const d = /^ {2}chunk \d+: \S+ seeds [\d,]+\.\.[\d,]+ \(([\d,]+)\) — complete .* in (\S+) \(recorded\)$/.exec(line);
      if (!d) continue;
      const run = { at: at - parseShownSeconds(d[2]) * 1000, seeds: Number(d[1].replaceAll(",", "")) };
      const inside = Math.max(0, Math.min(at, toMs) - Math.max(run.at, fromMs));
      seeds += at > run.at ? (run.seeds * inside) / (at - run.at) : 0;
    }
    return seeds / seconds;
  };
}

async function coordinatorServer(o, dir) {
  const campaign = join(dir, "coordinator");
  mkdirSync(campaign, { recursive: true });
  const config = join(campaign, "fuzzfleet.toml");
  writeFileSync(
    config,
    campaignToml({
      title: "hostile",
      jobs: 1,
      chunkSeconds: 2,
      bootstrapSeeds: Math.max(10, Math.round(1000 / o.costMs)),
      tail: `
[distributed]
bind = "127.0.0.1"
port = 0
lease_seconds = 120
drain_grace_minutes = 1
stop_grace_seconds = 20
`,
    }),
  );
  const env = { ...process.env, PLANTED_COST_MS: String(o.costMs) };
  const base = [process.execPath, CLI, "--config", config];
  const server = startProcess([...base, "coordinate", "--for", "2h", "--yes", "--token", TOKEN], { cwd: campaign, env });
  const port = Number((await server.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 60_000, "the coordinator to listen"))[1]);
  const worker = startProcess([...base, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN, "-j", "1"], { cwd: campaign, env });
  await worker.waitFor(/^ {2}chunk \d+: .* — complete/m, 120_000, "the honest worker's first chunk");
  return { name: "coordinator", unit: "seeds/s", process: server, worker, pid: server.pid, port, rate: honestRate(worker, "sweep") };
}

async function exploreServer(o, dir) {
  const root = join(dir, "explore");
  mkdirSync(join(root, "seeds"), { recursive: true });
  writeFileSync(join(root, "seeds", "s"), "s");
  // One child per input, itself plus an "x": the frontier never ends.
  const target = join(root, "chain.sh");
  writeFileSync(target, `#!/bin/sh\nsleep 0.02; { cat "$1"; printf x; } > "$SYMCC_OUTPUT_DIR/child"\n`);
  chmodSync(target, 0o755);
  const server = startProcess(
    [process.execPath, CLI, "explore", "-i", join(root, "seeds"), "-o", join(root, "corpus"), "-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "3600", "-t", "5", "--", target, "@@"],
    { cwd: root, env: process.env },
  );
  const port = Number((await server.waitFor(/listening on 127\.0\.0\.1:(\d+)/, 60_000, "the master to listen"))[1]);
  const worker = startProcess([process.execPath, CLI, "worker", "--master", `127.0.0.1:${port}`, "--token", TOKEN], { cwd: root, env: process.env });
  await worker.waitFor(/\(committed\)$/m, 120_000, "the honest worker's first commit");
  return { name: "explore master", unit: "tasks/s", process: server, worker, pid: server.pid, port, rate: honestRate(worker, "explore") };
}

async function measure(o, server) {
  const atRest = memoryOf(server.pid);
  // Chunk sizes settle on the rate first.
  await sleep(o.warmup * 1000);
  const levels = [];
  for (const [i, connections] of o.connections.entries()) {
    const last = i === o.connections.length - 1;
    const l = await level(server, { connections, malformed: last ? o.malformed : 0, seconds: o.seconds });
    levels.push(l);
    console.log(
      `  ${server.name}: ${connections} hostile connection(s)${l.malformed ? ` + ${int(l.malformed)} malformed frames` : ""}: ` +
        `RSS up to ${f0(l.rssMaxMB)} MB (VmHWM ${f0(l.peakMB)})`,
    );
  }
  server.process.child.kill("SIGINT");
  const [exit, workerExit] = await Promise.all([server.process.done, server.worker.done]);
  // Every chunk that overlapped a window has now landed (the drain waits for them).
  for (const l of levels) l.honestRate = server.rate(l.startMs, l.endMs);
  return { atRestMB: atRest.rssMB, levels, exitCode: exit.code, workerExitCode: workerExit.code };
}

function printResult(name, unit, r) {
  const base = r.levels.find((l) => l.connections === 0 && l.malformed === 0)?.honestRate ?? null;
  console.log(`\n${name}: at rest ${f0(r.atRestMB)} MB; exit ${r.exitCode}, honest worker exit ${r.workerExitCode}`);
  printTable([
    ["hostile conns", "malformed", "attack conns", "at accept", "after header", "reset", "no reply", "s", "RSS max MB", "VmHWM MB", "server CPU", "attacker CPU", `honest ${unit}`, "vs no attack"],
    ...r.levels.map((l) => {
      const a = (k) => l.declarers[k] + l.flood[k];
      return [
        l.connections,
        int(l.malformed),
        int(a("refused at accept") + a("refused") + a("reset") + a("no reply") + a("never connected")),
        int(a("refused at accept")),
        int(a("refused")),
        int(a("reset")),
        int(a("no reply") + a("never connected")),
        f1(l.seconds),
        f0(l.rssMaxMB),
        f0(l.peakMB),
        `${f0(l.serverCpu * 100)} %`,
        `${f0(l.attackerCpu * 100)} %`,
        f1(l.honestRate),
        base ? f2(l.honestRate / base) : "-",
      ];
    }),
  ]);
}

benchmarkMain("hostile", options(process.argv.slice(2)), async (scratch) => {
  const o = options(process.argv.slice(2));
  const result = {};
  const parts = o.part === "both" ? ["coordinator", "explore"] : [o.part];
  for (const part of parts) {
    const server = part === "coordinator" ? await coordinatorServer(o, scratch) : await exploreServer(o, scratch);
    try {
      result[part] = await measure(o, server);
    } finally {
      server.process.child.kill("SIGKILL");
      server.worker.child.kill("SIGKILL");
    }
    printResult(server.name, server.unit, result[part]);
  }
  const peaks = Object.values(result).flatMap((r) => r.levels.map((l) => l.peakMB));
  const worst = Math.max(...peaks);
  console.log(`\nverdict: peak ${f0(worst)} MB against the ${TARGET_MB} MB target: ${worst <= TARGET_MB ? "pass" : "MISS"}`);
  return { targetMB: TARGET_MB, ...result, worstPeakMB: worst };
});
