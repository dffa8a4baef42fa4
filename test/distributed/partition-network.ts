// What the partition and transfer-kill tests share: a worker host of its own (a network namespace
// joined to this host by a veth pair on the tests' own 10.X.N.0/30, and a mount namespace where
// the campaign directory's parent is an empty tmpfs), a link that can be cut and healed or slowed,
// and a generator whose failures weigh megabytes (the planted generator, each failure directory
// then padded with one large file), so that a chunk's transfer takes many `put` frames.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { CLI, exited, PLANTED, start, waitFor, type Campaign, type Running } from "../helpers/campaign.ts";
import { campaignToken } from "../helpers/wire.ts";

let made = 0;

export interface OwnNetwork {
  ns: string;
  /** This host's end (10.X.N.1): the coordinator or master binds it. */
  host: string;
  /** The link goes down: nothing passes either way, the connections stay open. */
  cut(): void;
  heal(): void;
  /** The worker's sending side limited to `rate` (tc tbf, e.g. "16mbit"). */
  slowUplink(rate: string): void;
  remove(): void;
}

/**
 * Namespaces (and their host ends) left by a test process that is gone — a run stopped by a
 * signal never reached its `remove()` — so that their addresses cannot clash with a new one's.
 */
function removeOrphans(): void {
  const listed = spawnSync("ip", ["netns", "list"], { encoding: "utf8" });
  for (const m of (listed.stdout ?? "").matchAll(/^ffpart((\d+)x\d+)\b/gm)) {
    const [, tag, pid] = m as unknown as [string, string, string];
    if (existsSync(`/proc/${pid}`)) continue;
    spawnSync("ip", ["link", "del", `ffph${tag}`.slice(0, 15)]);
    spawnSync("ip", ["netns", "del", `ffpart${tag}`]);
  }
}

function ip(...args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  assert.equal(r.status, 0, `ip ${args.join(" ")}: ${r.stderr}`);
}

/**
 * A network namespace joined to this host by a veth pair: this host at 10.`second`.N.1, the
 * namespace at 10.`second`.N.2 (each test file its own `second`, so files run side by side never clash).
 */
export function ownNetwork(second = 232): OwnNetwork {
  if (made === 0) removeOrphans();
  const n = 1 + ((process.pid + made) % 250);
  const tag = `${process.pid}x${made++}`;
  const ns = `ffpart${tag}`;
  const [outer, inner] = [`ffph${tag}`.slice(0, 15), `ffpn${tag}`.slice(0, 15)];
  const host = `10.${second}.${n}.1`;
  ip("netns", "add", ns);
  ip("link", "add", outer, "type", "veth", "peer", "name", inner);
  ip("link", "set", inner, "netns", ns);
  ip("addr", "add", `${host}/30`, "dev", outer);
  ip("link", "set", outer, "up");
  ip("netns", "exec", ns, "ip", "addr", "add", `10.${second}.${n}.2/30`, "dev", inner);
  ip("netns", "exec", ns, "ip", "link", "set", inner, "up");
  return {
    ns,
    host,
    cut: () => ip("link", "set", outer, "down"),
    heal: () => ip("link", "set", outer, "up"),
    slowUplink(rate: string) {
      const r = spawnSync("ip", ["netns", "exec", ns, "tc", "qdisc", "add", "dev", inner, "root", "tbf", "rate", rate, "burst", "32kb", "latency", "2s"], { encoding: "utf8" });
      assert.equal(r.status, 0, `tc on ${inner}: ${r.stderr}`);
    },
    remove() {
      spawnSync("ip", ["link", "del", outer]);
      spawnSync("ip", ["netns", "del", ns]);
    },
  };
}

/** `coordinate` listening on the network's host address, once its banner is complete. */
export async function coordinatorOn(c: Campaign, net: OwnNetwork, forWhat: string): Promise<Running & { port: number }> {
  const coord = start(c, ["coordinate", "--for", forWhat, "--bind", net.host]);
  const port = await waitFor(
    "the coordinator to listen on the veth address",
    () => {
      const m = new RegExp(`listening on ${net.host.replace(/\./g, "\\.")}:(\\d+)[^]*watch it: `).exec(coord.output());
      if (!m && coord.child.exitCode !== null) throw new Error(`coordinate exited early:\n${coord.output()}`);
      return m ? Number(m[1]) : undefined;
    },
    60_000,
  );
  return { ...coord, port };
}

/**
 * `fuzzfleet worker` on the other host: in the network namespace, in a mount namespace where the
 * campaign directory's parent is hidden. `ip netns exec`, `unshare` and `sh` each exec the next,
 * so the child's pid is the worker's own (a SIGKILL to it kills the worker, not a wrapper).
 */
export function remoteWorker(c: Campaign, net: OwnNetwork, port: number): Running {
  const child = spawn(
    "ip",
    ["netns", "exec", net.ns, "unshare", "-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd / && exec "$2" "$3" worker --master "$4" -j 1', "sh", dirname(c.dir), process.execPath, CLI, `${net.host}:${port}`],
    { env: { ...process.env, ...c.env, FUZZFLEET_TOKEN: campaignToken(c.outDir) }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let seen = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (seen += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (seen += d));
  return { child, result: exited(child), output: () => seen };
}

/**
 * `fuzzfleet worker --master` of an explore campaign on the other host: in the network namespace,
 * in a mount namespace where `hidden` is an empty tmpfs, started in `cwd` (its own copy of the
 * target). As remoteWorker, the child's pid is the worker's own.
 */
export function remoteExploreWorker(net: OwnNetwork, hidden: string, cwd: string, master: string, token: string, env: NodeJS.ProcessEnv = {}): Running {
  const child = spawn(
    "ip",
    ["netns", "exec", net.ns, "unshare", "-m", "sh", "-c", 'mount -t tmpfs fuzzfleet-hidden "$1" && cd "$2" && shift 2 && exec "$@"', "sh", hidden, cwd, process.execPath, CLI, "worker", "--master", master, "-j", "1", "--token", token],
    { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let seen = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (seen += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (seen += d));
  return { child, result: exited(child), output: () => seen };
}

/** The planted generator with every failure directory padded by `pad.bin` of `bytes` bytes. */
export interface PaddedGenerator {
  /** The [generator] table. */
  table: string;
  bytes: number;
  remove(): void;
}

const PAD_SCRIPT = `// planted.mjs, then each failure directory gets pad.bin: a large artifact, as a crash dump would be.
import { spawnSync } from "node:child_process";
import { readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
const [bytes, planted, ...args] = process.argv.slice(2);
const r = spawnSync(process.execPath, [planted, ...args], { stdio: "inherit" });
if (r.status === 0 || r.status === 1) {
  const failures = join(args[args.indexOf("--out") + 1], "failures");
  let seeds = [];
  try { seeds = readdirSync(failures); } catch {}
  for (const seed of seeds) writeFileSync(join(failures, seed, "pad.bin"), Buffer.alloc(Number(bytes), Number(seed) % 251));
}
process.exit(r.status ?? 70);
`;

/**
 * Lives outside /tmp (which the worker's mount namespace hides), at one path both hosts see, so the
 * worker's own copy is the coordinator's and the identity matches.
 */
export function paddedGenerator(bytes: number): PaddedGenerator {
  const dir = mkdtempSync(join("/var/tmp", "fuzzfleet-padded-"));
  const script = join(dir, "padded.mjs");
  writeFileSync(script, PAD_SCRIPT);
  const table = `[generator]
command = ["node", ${JSON.stringify(script)}, "${bytes}", ${JSON.stringify(PLANTED)}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(script)}, ${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
`;
  return { table, bytes, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The coordinator's landing directories of units (<out>/tmp/chunk-N, minimize-N). */
export function landingDirs(c: Campaign): string[] {
  try {
    return readdirSync(join(c.outDir, "tmp")).filter((n) => /^(chunk|minimize)-\d+$/.test(n));
  } catch {
    return [];
  }
}

/** What must still be missing of an artifact landing in part: two 1 MiB pieces, so the transfer is not about to end. */
const STILL_TO_COME = 2 * 2 ** 20;

/**
 * A chunk whose padded artifact has landed in part on the coordinator (some pieces, and at least
 * two more to come), or undefined.
 */
export function landingInPart(c: Campaign, bytes: number): { chunk: number; dir: string } | undefined {
  for (const name of landingDirs(c)) {
    const dir = join(c.outDir, "tmp", name);
    const failures = join(dir, "failures");
    for (const seed of existsSync(failures) ? readdirSync(failures) : []) {
      const file = join(failures, seed, "pad.bin");
      const size = existsSync(file) ? statSync(file).size : 0;
      if (size > 0 && size <= bytes - STILL_TO_COME && name.startsWith("chunk-")) return { chunk: Number(name.slice("chunk-".length)), dir };
    }
  }
  return undefined;
}
