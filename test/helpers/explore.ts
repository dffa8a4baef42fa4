// Explore-campaign scaffolding: a temp directory with seeds, the compiled CLI run as a real
// process, and readers for the corpus and the statistics it leaves behind.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CLI, killProcessesMentioning, ROOT, waitFor } from "./campaign.ts";
import type { ExploreStats } from "../../src/explore/command/stats.ts";
import { DEFAULT_BUDGETS } from "../../src/explore/defaults.ts";
import { ExploreMaster } from "../../src/explore/master/master.ts";
import type { MasterOptions } from "../../src/explore/master/options.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";

/** The target build the masters these helpers make record under. */
export const TEST_BUILD = "0123456789ab";

export const MAZE = join(ROOT, "examples/maze/maze.mjs");
export const MAZE_SEEDS = join(ROOT, "examples/maze/seeds");


export interface Started {
  child: ChildProcess;
  output: () => string;
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The port it says it listens on, once it has said so (started with --port 0 --bind 127.0.0.1). */
  port: () => Promise<number>;
}

export class ExploreDir {
  readonly dir = mkdtempSync(join(tmpdir(), "fuzzfleet-explore-"));
  readonly seeds = join(this.dir, "seeds");
  readonly corpus = join(this.dir, "corpus");
  readonly statsPath = join(this.dir, "stats.json");

  constructor() {
    mkdirSync(this.seeds);
  }

  seed(name: string, content: string | Buffer): void {
    writeFileSync(join(this.seeds, name), content);
  }

  /** A shell-script target in the campaign directory. */
  script(name: string, body: string): string {
    const path = join(this.dir, name);
    writeFileSync(path, `#!/bin/sh\n${body}\n`);
    chmodSync(path, 0o755);
    return path;
  }

  args(extra: string[], target: string[]): string[] {
    return ["explore", "-i", this.seeds, "-o", this.corpus, "--stats-json", this.statsPath, ...extra, "--", ...target];
  }

  run(extra: string[], target: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 120_000) {
    const r = spawnSync(process.execPath, [CLI, ...this.args(extra, target)], {
      cwd: this.dir,
      env: { ...process.env, ...env },
      encoding: "utf8",
      timeout: timeoutMs,
    });
    return { code: r.status, stdout: r.stdout, stderr: r.stderr };
  }

  start(extra: string[], target: string[], env: NodeJS.ProcessEnv = {}): Started {
    return this.startWith(this.args(extra, target), env);
  }

  /** Starts the CLI with exactly these arguments. */
  startWith(args: string[], env: NodeJS.ProcessEnv = {}): Started {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: this.dir, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
    child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
    const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("close", (code, signal) => resolve({ code, signal })));
    const port = () =>
      waitFor("the master to listen", () => {
        const m = /listening on 127\.0\.0\.1:(\d+)/.exec(out);
        return m ? Number(m[1]) : undefined;
      });
    return { child, output: () => out, done, port };
  }

  /** The --stats-json file, as the campaign wrote it. */
  stats(): ExploreStats {
    return JSON.parse(readFileSync(this.statsPath, "utf8")) as ExploreStats;
  }

  /** Every entry of the corpus directory (hidden ones included). */
  entries(): string[] {
    return readdirSync(this.corpus).sort();
  }

  corpusFiles(): string[] {
    return this.entries().filter((n) => /^[0-9a-f]{64}$/.test(n));
  }

  cleanup(): void {
    killProcessesMentioning(this.dir);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * A lone ExploreMaster (rank 0 of 1, rendezvous ownership, the default budgets, a 5 s per-run
 * timeout) over `corpusDir` and `inputDir`, its staging and lease records below `dir`; `over`
 * replaces any option.
 */
/**
 * Writes a seed as a seed directory holds it: an old file, which a master admits at first sight
 * (a fresh one waits until it stopped changing: explore/master/admission.ts).
 */
export function writeSeed(path: string, content: string | Buffer): void {
  writeFileSync(path, content);
  const old = new Date(Date.now() - 3600_000);
  utimesSync(path, old, old);
}

export function loneMaster(o: { dir: string; corpusDir: string; inputDir: string }, over: Partial<MasterOptions> = {}): ExploreMaster {
  return new ExploreMaster({
    corpusDir: o.corpusDir,
    inputDir: o.inputDir,
    stagingRoot: join(o.dir, "staging"),
    leases: new LeaseTable({ root: join(o.dir, "leases"), durability: "fence" }),
    epoch: "e".repeat(64),
    rank: 0,
    ranks: [0],
    ownership: "rendezvous",
    budgets: DEFAULT_BUDGETS,
    timeoutSeconds: 5,
    leaseTtlMs: 60_000,
    wallNow: () => Date.now(),
    log: () => {},
    build: TEST_BUILD,
    ...over,
  });
}
