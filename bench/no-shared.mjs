#!/usr/bin/env node
// no-shared: what a sweep worker without the shared directory costs, in two parts.
//
// (a) efficiency. The planted example swept by a `fuzzfleet coordinate` and two real
//     `fuzzfleet worker -j 1` on 127.0.0.1, in rounds that alternate the two modes: shared (the
//     workers see the campaign directory) and no-shared (each worker in a mount namespace of its
//     own where the campaign directory's parent is an empty tmpfs, so its chunks' failures travel
//     back in `put` frames). Each worker's seeds/s from its process start to the ack of its last
//     chunk (as bench/distributed.mjs), the share of that span its generator ran (which cancels the
//     machine's load), their ratios, and the bytes and files that travelled per chunk and per find.
// (b) memory. A real coordinator and one worker double speaking the real wire (dist/ modules)
//     that says it does not see the shared directory, takes a chunk and sends it a failure with a
//     large crash artifact in 1 MiB pieces, then its `done`. The coordinator's resident set is
//     sampled from before the first piece to the ack of the `done` (the chunk ingested). Then a
//     chunk of many small files: each one's put -> ack, the cost a file adds to a chunk.
//
// Needs root for (a)'s no-shared side (unshare -m, mount). Runs against the compiled CLI:
// `npm run build && node bench/no-shared.mjs [--help]`.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import Database from "better-sqlite3";
import { benchmarkMain, CLI, f0, f1, f2, f3, int, median, parseOptions, percentile, peakRssMb, printTable, ROOT, sleep, startProcess, sum } from "./common.mjs";
import { budgetSeconds, calibrate } from "./planted.mjs";
import { newCampaign } from "./sweep-fakes.mjs";

const TARGET_EFFICIENCY = 0.95;
const TARGET_RSS_GROWTH_MB = 64;
const TOKEN = "no-shared-bench-token-0123456789abcdef";
const MIB = 2 ** 20;

const HELP = `usage: node bench/no-shared.mjs [options]

  --part P            efficiency, memory or both                              default both

 (a) efficiency: coordinator + 2 loopback workers, shared vs no-shared (needs root)
  --chunk-seconds S   target chunk length                                     default 5
  --chunks N          chunks per worker per session                           default 6
  --cost-ms M         PLANTED_COST_MS: ms of busy work per seed               default 2
  --rounds R          shared/no-shared pairs, run ABAB                        default 2

 (b) memory: one chunk's failure with a large artifact sent to a real coordinator
  --artifact-mib M    the artifact's size                                     default 50
  --sample-ms MS      how often the coordinator's resident set is read        default 5
  --small-files N     then a chunk of N small files: each one's put -> ack    default 400`;

function options(argv) {
  return parseOptions(
    "no-shared",
    argv,
    {
      part: { default: "both", choices: ["efficiency", "memory", "both"] },
      "chunk-seconds": { default: "5", number: { min: 1 } },
      chunks: { default: "6", number: { min: 1, integer: true } },
      "cost-ms": { default: "2", number: { min: 0.01 } },
      rounds: { default: "2", number: { min: 1, integer: true } },
      "artifact-mib": { default: "50", number: { min: 1, max: 500 } },
      "sample-ms": { default: "5", number: { min: 1 } },
      "small-files": { default: "400", number: { min: 1, max: 5000, integer: true } },
    },
    HELP,
  );
}

async function startCoordinator(c, env, seconds) {
  const coord = startProcess([process.execPath, CLI, "--config", c.config, "coordinate", "--for", `${seconds}s`, "--yes", "--token", TOKEN], { cwd: c.campaign, env });
  const port = Number((await coord.waitFor(/listening on 127\.0\.0\.1:(\d+)[^]*watch it: /, 60_000, "the coordinator to listen"))[1]);
  return { coord, port };
}

// ---------------------------------------------------------------------------------------------
// (a) efficiency

/** A worker that sees the campaign directory, or one whose mount namespace hides it (its parent under an empty tmpfs). */
function worker(mode, c, port, env) {
  const argv = [process.execPath, CLI, "worker", "--master", `127.0.0.1:${port}`, "-j", "1", "--token", TOKEN];
  if (mode === "shared") return startProcess(argv, { cwd: c.campaign, env });
  return startProcess(["unshare", "-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd / && shift && exec "$@"', "sh", dirname(c.campaign), ...argv], { cwd: "/", env });
}

async function session(mode, o, env, dir, bootstrapSeeds) {
  const c = newCampaign(dir, { title: "no-shared", jobs: 1, chunkSeconds: o.chunkSeconds, bootstrapSeeds });
  const { coord, port } = await startCoordinator(c, env, budgetSeconds(o));
  const workers = [0, 1].map(() => worker(mode, c, port, env));
  const [end, ...ends] = await Promise.all([coord.done, ...workers.map((w) => w.done)]);
  if (end.code !== 0 && end.code !== 1) throw new Error(`coordinate (${mode}) exited ${end.code ?? end.signal}:\n${coord.output()}`);
  for (const [i, e] of ends.entries()) if (e.code !== 0) throw new Error(`worker ${i + 1} (${mode}) exited ${e.code ?? e.signal}:\n${workers[i].output()}`);
  const said = workers.map((w) => w.output()).join("");
  if (mode === "no-shared" && !/no shared directory/.test(said)) throw new Error(`the no-shared workers saw the shared directory:\n${said}`);
  const db = new Database(c.db, { readonly: true, fileMustExist: true });
  let seeds, chunks, finds;
  try {
    ({ seeds, chunks } = db.prepare("SELECT COALESCE(SUM(seed_to - seed_from + 1), 0) AS seeds, COUNT(*) AS chunks FROM chunk WHERE status = 'complete'").get());
    finds = db.prepare("SELECT COUNT(*) AS n FROM failure_seed").get().n;
  } finally {
    db.close();
  }
  // Each worker's line per chunk, stamped when the worker printed it (at the coordinator's ack):
  // "  chunk 7: small seeds 1..100 (100) — complete (rc 1) in 5.0s, 3 file(s) 400 bytes sent (recorded)"
  // (or "in 1m05s").
  const per = workers.map((w) => {
    const done = w.lines
      .map((l) => ({ at: l.at, m: /chunk \d+: \S+ seeds [\d,]+\.\.[\d,]+ \(([\d,]+)\) — complete \(rc [01]\) in ((?:\d+m)?[\d.]+s)(?:, ([\d,]+) file\(s\) ([\d,]+) bytes sent)? \(recorded\)/.exec(l.line) }))
      .filter((x) => x.m);
    const n = (i) => done.map((x) => Number((x.m[i] ?? "0").replace(/,/g, "")));
    // A chunk of a minute or more reads "1m05s".
    const seconds = (d) => d.replace(/s$/, "").split("m").reduce((acc, part) => acc * 60 + Number(part), 0);
    // From its process start to the ack of its last chunk: its own start-up and every round trip count.
    const span = done.length ? (done[done.length - 1].at - w.startedAtMs) / 1000 : NaN;
    return { chunks: done.length, seeds: sum(n(1)), generatorSeconds: sum(done.map((x) => seconds(x.m[2]))), span, files: sum(n(3)), bytes: sum(n(4)) };
  });
  return {
    mode,
    seconds: end.seconds,
    seeds,
    chunks,
    finds,
    seedsPerSec: seeds / end.seconds,
    workerSeedsPerSec: sum(per.map((p) => p.seeds / p.span)),
    // The share of each worker's span its generator ran: what the machine's load does to the generator cancels out.
    busy: sum(per.map((p) => p.generatorSeconds)) / sum(per.map((p) => p.span)),
    // A chunk's time outside its generator run: start-up shared out, round trips, the transfer (no-shared), the ack.
    overheadMs: (1000 * (sum(per.map((p) => p.span)) - sum(per.map((p) => p.generatorSeconds)))) / sum(per.map((p) => p.chunks)),
    files: sum(per.map((p) => p.files)),
    bytes: sum(per.map((p) => p.bytes)),
  };
}

async function efficiency(o, env, scratch) {
  const cal = await calibrate({ jobs: 1, costMs: o.costMs, chunkSeconds: o.chunkSeconds }, env, scratch);
  console.log(`calibration: ${f1(cal.seedsPerSec)} seeds/s alone; bootstrap_seeds ${cal.bootstrapSeeds}; sessions of ${budgetSeconds(o)} s`);
  const runs = [];
  for (let r = 1; r <= o.rounds; r++) {
    for (const mode of r % 2 ? ["shared", "no-shared"] : ["no-shared", "shared"]) {
      const dir = join(scratch, `round-${r}-${mode}`);
      mkdirSync(dir);
      const s = await session(mode, o, env, dir, cal.bootstrapSeeds);
      runs.push({ round: r, ...s });
      console.log(`  round ${r} ${mode}: ${int(s.seeds)} seeds in ${f1(s.seconds)} s, ${s.chunks} chunks, ${s.finds} finds, ${int(s.bytes)} bytes sent`);
    }
  }
  const of = (mode) => runs.filter((x) => x.mode === mode);
  const rate = (mode) => sum(of(mode).map((x) => x.seeds)) / sum(of(mode).map((x) => x.seconds));
  const workerRate = (mode) => sum(of(mode).map((x) => x.workerSeedsPerSec)) / of(mode).length;
  const busy = (mode) => sum(of(mode).map((x) => x.busy)) / of(mode).length;
  const ratio = workerRate("no-shared") / workerRate("shared");
  const around = busy("no-shared") / busy("shared");
  const sessions = rate("no-shared") / rate("shared");
  const ns = of("no-shared");
  const [chunks, finds, bytes, files] = ["chunks", "finds", "bytes", "files"].map((k) => sum(ns.map((x) => x[k])));
  const overhead = (mode) => sum(of(mode).map((x) => x.overheadMs)) / of(mode).length;
  const rows = [["round", "mode", "seeds", "session s", "session seeds/s", "workers' seeds/s", "generator busy", "ms/chunk outside", "chunks", "finds", "files sent", "bytes sent"]];
  for (const x of runs) rows.push([x.round, x.mode, int(x.seeds), f1(x.seconds), f1(x.seedsPerSec), f1(x.workerSeedsPerSec), f3(x.busy), f0(x.overheadMs), x.chunks, x.finds, int(x.files), int(x.bytes)]);
  for (const mode of ["shared", "no-shared"]) rows.push(["all", mode, "", "", f1(rate(mode)), f1(workerRate(mode)), f3(busy(mode)), f0(overhead(mode)), "", "", "", ""]);
  printTable(rows);
  console.log(`efficiency, workers' seeds/s (no-shared / shared): ${f3(ratio)} (target >= ${TARGET_EFFICIENCY})`);
  console.log(`efficiency around the generator (share of each worker's span its generator ran, no-shared / shared): ${f3(around)}`);
  console.log(`whole sessions' seeds/s (no-shared / shared), for context: ${f3(sessions)}`);
  console.log(`a chunk's time outside its generator run: ${f0(overhead("shared"))} ms shared, ${f0(overhead("no-shared"))} ms no-shared`);
  console.log(`no-shared: ${f1(bytes / chunks)} bytes and ${f2(files / chunks)} files per complete chunk; ${f1(bytes / Math.max(1, finds))} bytes per find (${finds} finds)`);
  for (const x of ns) if (x.finds > 0 && x.bytes === 0) throw new Error(`round ${x.round}: no-shared workers found failures but sent no bytes`);
  return { calibration: cal, runs, overheadMs: { shared: overhead("shared"), noShared: overhead("no-shared") }, efficiency: ratio, efficiencyAroundGenerator: around, sessionRatio: sessions, bytesPerChunk: bytes / chunks, filesPerChunk: files / chunks, bytesPerFailure: bytes / Math.max(1, finds) };
}

// ---------------------------------------------------------------------------------------------
// (b) memory

function rssMb(pid) {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m[1]) / 1024;
}

async function memory(o, env, scratch) {
  const url = (p) => pathToFileURL(join(ROOT, "dist", p)).href;
  const [{ dial }, messages, { proveIdentity }] = await Promise.all([import(url("net/connection.js")), import(url("net/messages.js")), import(url("config/identity.js"))]);
  const { z } = await import("zod");
  const c = newCampaign(join(scratch, "memory"), { title: "no-shared", jobs: 1, chunkSeconds: 60, bootstrapSeeds: 50 });
  const { coord, port } = await startCoordinator(c, env, 300);
  const conn = await dial("127.0.0.1", port, 10_000);
  try {
    const first = await conn.request({ type: "hello", token: TOKEN, protocol: messages.PROTOCOL_VERSION, host: "bench", jobs: 1, slots: 1 }, messages.HandshakeReply, 10_000);
    if (first.type !== "challenge") throw new Error(`handshake: ${JSON.stringify(first)}`);
    const welcome = await conn.request({ ...proveIdentity(first), nonce: null, shared_dir: false }, z.discriminatedUnion("type", [messages.Welcome, messages.Refuse]), 10_000);
    if (welcome.type !== "welcome" || !welcome.transfer) throw new Error(`not welcomed as a worker without the shared directory: ${JSON.stringify(welcome)}`);
    const want = async () => {
      const assign = await conn.request({ type: "want", slots: 1 }, messages.CoordinatorReply, 10_000);
      if (assign.type !== "assign") throw new Error(`want: ${JSON.stringify(assign)}`);
      return assign.chunks[0];
    };
    const done = (chunk, count, bytes) =>
      conn.request({ type: "done", chunk_id: chunk.chunk_id, elapsed: 1, rc: 1, outcome: "complete", error: null, files: { count, bytes, wrote: "results" } }, messages.CoordinatorReply, 60_000);
    const piece = welcome.transfer.piece_bytes;
    const put = async (chunk, path, body) => {
      const hash = createHash("sha256");
      for (let offset = 0; offset < body.length || offset === 0; offset += piece) {
        const part = body.subarray(offset, Math.min(body.length, offset + piece));
        hash.update(part);
        const last = offset + part.length === body.length;
        const r = await conn.request({ type: "put", unit: chunk.chunk_id, path, size: body.length, offset, data: part.toString("base64"), sha256: last ? hash.digest("hex") : null }, messages.CoordinatorReply, 30_000);
        if (r.type !== "ack") throw new Error(`put ${path} at ${offset}: ${JSON.stringify(r)}`);
        if (last) break;
      }
    };
    const input = Buffer.from("push 0\ndup\ndrop\n");
    const metaOf = (seed) => Buffer.from(JSON.stringify({ seed, bucket: "crash", shrunk: true, msg: "bench: a crash", repro: `node planted.mjs --seed ${seed}` }));
    const chunk = await want();
    const seed = chunk.seed_from;
    const meta = metaOf(seed);
    // Not all one byte: a filesystem that compresses or dedups must not make the artifact cheap.
    const artifact = Buffer.alloc(o.artifactMib * MIB);
    for (let i = 0; i < artifact.length; i += 4096) artifact.writeUInt32LE((i * 2654435761) >>> 0, i);

    await sleep(1000);
    const before = rssMb(coord.pid);
    const hwmBefore = peakRssMb(coord.pid);
    let peak = before;
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, rssMb(coord.pid));
      } catch {
        // gone: the session's end is checked below
      }
    }, o.sampleMs);
    const t0 = performance.now();
    let ack, sendSeconds, ingestSeconds;
    try {
      await put(chunk, `failures/${seed}/meta.json`, meta);
      await put(chunk, `failures/${seed}/input.min.txt`, input);
      await put(chunk, `failures/${seed}/core.bin`, artifact);
      const sentAt = performance.now();
      ack = await done(chunk, 3, meta.length + input.length + artifact.length);
      sendSeconds = (sentAt - t0) / 1000;
      ingestSeconds = (performance.now() - sentAt) / 1000;
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, rssMb(coord.pid));
    const hwmAfter = peakRssMb(coord.pid);
    if (ack.type !== "ack" || ack.note !== "recorded") throw new Error(`done: ${JSON.stringify(ack)}`);
    const growth = peak - before;
    printTable([
      ["artifact", "RSS before", "RSS peak", "growth", "VmHWM before", "VmHWM after", "send s", "ingest s"],
      [`${o.artifactMib} MiB`, f1(before), f1(peak), f1(growth), f1(hwmBefore), f1(hwmAfter), f2(sendSeconds), f3(ingestSeconds)],
    ]);
    console.log(`coordinator RSS growth while receiving and ingesting the chunk: ${f1(growth)} MB (target <= ${TARGET_RSS_GROWTH_MB} MB; sampled every ${o.sampleMs} ms)`);

    // What each file costs a chunk with many small ones (the planted example's: ~5 files a find): one put and its ack.
    const small = await want();
    const smallMeta = metaOf(small.seed_from);
    const body = Buffer.alloc(200, 0x61);
    await put(small, `failures/${small.seed_from}/meta.json`, smallMeta);
    await put(small, `failures/${small.seed_from}/input.min.txt`, input);
    const times = [];
    for (let i = 0; i < o.smallFiles; i++) {
      const at = performance.now();
      await put(small, `failures/${small.seed_from}/extra-${i}.txt`, body);
      times.push(performance.now() - at);
    }
    const smallAck = await done(small, o.smallFiles + 2, smallMeta.length + input.length + o.smallFiles * body.length);
    if (smallAck.type !== "ack" || smallAck.note !== "recorded") throw new Error(`done (small files): ${JSON.stringify(smallAck)}`);
    const putMs = { mean: sum(times) / times.length, p50: median(times), p99: percentile(times, 99) };
    console.log(`a small file's put -> ack: mean ${f3(putMs.mean)} ms, p50 ${f3(putMs.p50)} ms, p99 ${f3(putMs.p99)} ms (${o.smallFiles} files of ${body.length} bytes)`);
    return { artifactMib: o.artifactMib, rssBeforeMb: before, rssPeakMb: peak, growthMb: growth, hwmBeforeMb: hwmBefore, hwmAfterMb: hwmAfter, sendSeconds, ingestSeconds, smallFiles: o.smallFiles, putMs };
  } finally {
    conn.destroy();
    coord.child.kill("SIGINT");
    await coord.done;
  }
}

const o = options(process.argv.slice(2));
benchmarkMain("no-shared", o, async (scratch) => {
  const env = { ...process.env, PLANTED_COST_MS: String(o.costMs) };
  const result = {};
  if (o.part !== "memory") result.efficiency = await efficiency(o, env, scratch);
  if (o.part !== "efficiency") result.memory = await memory(o, env, scratch);
  return result;
});
