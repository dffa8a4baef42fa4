// Integration-test scaffolding: a throw-away campaign directory with a config for the bundled
// planted-bug generator, the compiled CLI run as a real child process, and read access to the
// real SQLite store for assertions.
import Database from "better-sqlite3";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mergeRanges, subtractRanges, type Range } from "../../src/core/ranges.ts";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const CLI = join(ROOT, "dist/cli/main.js");
export const PLANTED = join(ROOT, "examples/planted/planted.mjs");
/** The planted bugs' minimized forms (examples/planted/README.md). */
export const PLANTED_FORMS: ReadonlySet<string> = new Set([
  "push 0\ndup\ndrop",
  "push 0\npush 0\nswap\nswap",
  "push 0\ndup\nswap\nswap",
  "push 0\npush -1\nsub",
  "push 1\npush -1\nmul",
  "push 0\npush -1\npow",
]);

export interface CampaignOptions {
  /** Extra [defaults] lines. */
  defaults?: Record<string, string | number | boolean>;
  /** Lanes: name -> TOML body lines. */
  lanes?: Record<string, string>;
  /** Replaces the whole [generator] table. */
  generator?: string;
  /** Appended verbatim. */
  extra?: string;
  /** CPU cost per seed of the planted generator (PLANTED_COST_MS; not part of the generation). */
  costMs?: number;
}

export class Campaign {
  readonly dir: string;
  readonly configPath: string;
  readonly dbPath: string;
  readonly outDir: string;
  /** Environment given to every CLI run. */
  env: NodeJS.ProcessEnv = {};

  constructor(o: CampaignOptions = {}) {
    this.dir = mkdtempSync(join(tmpdir(), "fuzzfleet-test-"));
    this.configPath = join(this.dir, "fuzzfleet.toml");
    this.dbPath = join(this.dir, "fuzzfleet.db");
    this.outDir = join(this.dir, "fuzzfleet-out");
    this.writeConfig(o);
  }

  writeConfig(o: CampaignOptions = {}): void {
    const defaults = {
      jobs: 1,
      nice: 0,
      idle_io: false,
      chunk_minutes: 0.05,
      bootstrap_seeds: 100,
      max_shrinks: 20,
      ...o.defaults,
    };
    const gen = JSON.stringify(PLANTED);
    this.env.PLANTED_COST_MS = String(o.costMs ?? 0);
    const generator =
      o.generator ??
      `[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}", "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${JSON.stringify(PLANTED.replace(/planted\.mjs$/, "*.mjs"))}]
check = ["node", ${gen}, "--check", "--seeds", "{seeds}", "--json"]
`;
    const lanes = o.lanes ?? { small: 'base_seed = 1\nargs = ["--size", "small"]' };
    const text = [
      "[defaults]",
      ...Object.entries(defaults).map(([k, v]) => `${k} = ${typeof v === "string" ? JSON.stringify(v) : v}`),
      "",
      generator,
      ...Object.entries(lanes).map(([name, body]) => `[lanes.${name}]\n${body}\n`),
      o.extra ?? "",
    ].join("\n");
    writeFileSync(this.configPath, text);
  }

  /** Runs the CLI to completion. */
  cli(args: string[], opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {}): CliResult {
    const r = spawnSync(process.execPath, [CLI, "--config", this.configPath, ...args], {
      cwd: this.dir,
      env: { ...process.env, ...this.env, ...opts.env },
      encoding: "utf8",
      timeout: opts.timeoutMs ?? 120_000,
      input: opts.input ?? "",
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr, signal: r.signal };
  }

  /** Starts the CLI in the background. */
  spawn(args: string[], env: NodeJS.ProcessEnv = {}): ChildProcess {
    return spawn(process.execPath, [CLI, "--config", this.configPath, ...args], {
      cwd: this.dir,
      env: { ...process.env, ...this.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
  }

  db(): Database.Database {
    return new Database(this.dbPath, { readonly: true, fileMustExist: true });
  }

  query<T>(sql: string, ...args: unknown[]): T[] {
    const db = this.db();
    try {
      return db.prepare(sql).all(...args) as T[];
    } finally {
      db.close();
    }
  }

  one<T>(sql: string, ...args: unknown[]): T {
    return this.query<T>(sql, ...args)[0]!;
  }

  /** Kills every process whose command line mentions this campaign directory, then removes it. */
  cleanup(): void {
    killProcessesMentioning(this.dir);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  signal: NodeJS.Signals | null;
}

export interface LaneRow {
  id: number;
  name: string;
  base_seed: number;
  cursor: number;
  seeds_per_sec: number | null;
}

/**
 * Asserts the coverage invariant for every active lane: [base, cursor) is exactly covered by
 * complete chunks (no hole), and cursor - base equals the sum of complete chunk sizes below it.
 * Returns a description of any violation (empty when the invariant holds).
 */
export function coverageViolations(c: Campaign): string[] {
  const problems: string[] = [];
  for (const lane of c.query<LaneRow>("SELECT * FROM lane WHERE retired = 0")) {
    const complete = c
      .query<{ seed_from: number; seed_to: number }>("SELECT seed_from, seed_to FROM chunk WHERE lane_id = ? AND status = 'complete'", lane.id)
      .map((r): Range => [r.seed_from, r.seed_to]);
    if (lane.cursor > lane.base_seed) {
      const holes = subtractRanges([lane.base_seed, lane.cursor - 1], complete);
      if (holes.length > 0) problems.push(`lane ${lane.name}: holes below the cursor ${JSON.stringify(holes)}`);
    }
    const merged = mergeRanges(complete.filter(([, to]) => to < lane.cursor));
    const covered = merged.reduce((n, [a, b]) => n + (b - a + 1), 0);
    if (covered !== lane.cursor - lane.base_seed) {
      problems.push(`lane ${lane.name}: cursor - base = ${lane.cursor - lane.base_seed} but complete chunks below it hold ${covered}`);
    }
  }
  return problems;
}

/** Live (non-zombie) processes whose command line contains `needle`. */
export function processesMentioning(needle: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, "utf8");
      if (!cmdline.includes(needle)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
      if (state !== "Z") found.push(Number(name));
    } catch {
      // The process exited while we looked.
    }
  }
  return found;
}

export function killProcessesMentioning(needle: string): void {
  for (const pid of processesMentioning(needle)) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

/** Polls `probe` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs = 30_000, everyMs = 100): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    let v: T | undefined;
    try {
      v = probe();
    } catch (err) {
      if (err instanceof Error && err.message.startsWith("coordinate exited early")) throw err;
      v = undefined;
    }
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Resolves with the exit code (or signal) of a spawned child, collecting its output. */
export function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  return new Promise((resolve) => {
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** The [distributed] table tests use: loopback, a free port, short graces. */
export function distributedTable(o: { lease?: number; drainGraceMinutes?: number; stopGrace?: number } = {}): string {
  return `[distributed]
bind = "127.0.0.1"
port = 0
lease_seconds = ${o.lease ?? 20}
drain_grace_minutes = ${o.drainGraceMinutes ?? 1}
stop_grace_seconds = ${o.stopGrace ?? 10}
`;
}

export interface Running {
  child: ChildProcess;
  result: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
  /** Output so far (stdout + stderr). */
  output(): string;
}

/** Spawns the CLI and collects its output from the first byte. */
export function start(c: Campaign, args: string[], env: NodeJS.ProcessEnv = {}): Running {
  const child = c.spawn(args, env);
  let seen = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (seen += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (seen += d));
  const result = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>((resolve) => {
    let out = "";
    let err = "";
    child.stdout!.on("data", (d: string) => (out += d));
    child.stderr!.on("data", (d: string) => (err += d));
    child.on("close", (code, signal) => resolve({ code, signal, stdout: out, stderr: err }));
  });
  return { child, result, output: () => seen };
}

/**
 * The end of a session started with start(), or — after `ms` — a SIGKILL and an error carrying all
 * it printed: a session that hangs fails its test instead of holding the whole suite (the test's
 * own clean-up still runs).
 */
export async function finished(r: Running, ms: number, what = "the session"): Promise<Awaited<Running["result"]>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      r.child.kill("SIGKILL");
      reject(new Error(`${what} did not end within ${ms / 1000} s; killed. It printed:\n${r.output()}`));
    }, ms);
  });
  try {
    return await Promise.race([r.result, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Starts `coordinate` and resolves once it listens and its whole banner arrived (it ends with "watch it:"), with its port. */
export async function startCoordinator(c: Campaign, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Running & { port: number }> {
  const r = start(c, ["coordinate", ...args], env);
  const port = await waitFor("the coordinator to listen", () => {
    const m = /listening on 127\.0\.0\.1:(\d+)[^]*watch it: /.exec(r.output());
    if (!m && r.child.exitCode !== null) throw new Error(`coordinate exited early:\n${r.output()}`);
    return m ? Number(m[1]) : undefined;
  }, 60_000);
  return { ...r, port };
}

/** A port on 127.0.0.1 that was free a moment ago: for a master whose workers must know its address before it starts, and for a dial that must find nobody listening. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
