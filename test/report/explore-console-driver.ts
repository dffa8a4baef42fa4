// A lone explore master with the terminal view, for the pseudo-terminal test: the maze (made to
// abort at its treasure) explored from its seeds by one local slot, the master's log lines
// written through the console, the view drawn with log-update on a terminal, or one status line
// a second without one. Usage: node --import tsx explore-console-driver.ts SCRATCH_DIR
import { chmodSync, cpSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { ExploreDashboardSource } from "../../src/explore/views/dashboard-source.ts";
import { MasterLoop } from "../../src/explore/command/master-loop.ts";
import { DEFAULT_BUDGETS } from "../../src/explore/defaults.ts";
import { IdleWindow } from "../../src/explore/fleet/endings.ts";
import { LeaseTable } from "../../src/explore/state/lease-table.ts";
import { ExploreConsole } from "../../src/explore/views/console.ts";
import { loneMaster, MAZE, MAZE_SEEDS } from "../helpers/explore.ts";

const dir = process.argv[2]!;
const inputDir = join(dir, "seeds");
cpSync(MAZE_SEEDS, inputDir, { recursive: true });
const corpusDir = join(dir, "corpus");
mkdirSync(corpusDir);
const wrapper = join(dir, "maze.sh");
writeFileSync(wrapper, `#!/bin/sh\n"${process.execPath}" "${MAZE}" "$1"\nrc=$?\nif [ $rc -ge 128 ]; then echo "maze: the treasure" >&2; kill -ABRT $$; fi\nexit $rc\n`);
chmodSync(wrapper, 0o755);
const live = process.stdout.isTTY && process.stdout.columns > 0 ? (await import("log-update")).default : null;
let con: ExploreConsole | null = null;
const log = (line: string) => (con ? con.line(`[explore] ${line}`) : process.stdout.write(`[explore] ${line}\n`));
const leases = new LeaseTable({ root: join(dir, "leases"), durability: "fence" });
const master = loneMaster({ dir, corpusDir, inputDir }, { leases, log });
const now = () => performance.now();
const startMs = now();
const ac = new AbortController();
const ending = new IdleWindow(master, 1500, log);
const loop = new MasterLoop({
  master,
  local: { slots: 1, corpusDir, target: [wrapper, "@@"], targetCwd: dir, simulate: false, budgets: DEFAULT_BUDGETS, scratchDir: join(dir, "scratch") },
  signal: ac.signal,
  timeoutSeconds: 5,
  wallTimeoutSeconds: 0,
  leaseTtlMs: 60_000,
  stopGraceSeconds: 1,
  multiMaster: false,
  now,
  log,
});
const source = new ExploreDashboardSource({
  title: "explore",
  files: null,
  live: {
    master,
    leases,
    corpusDir,
    target: [wrapper, "@@"],
    epoch: "e".repeat(64),
    rank: 0,
    ranks: [0],
    role: "single",
    ending: () => ending,
    slots: 1,
    remote: () => null,
    maxIdleSeconds: 1.5,
    wallTimeoutSeconds: 0,
    leaseTtlMs: 60_000,
    heartbeatSeconds: 5,
    now,
    startMs,
  },
});
con = new ExploreConsole({ snapshot: () => source.snapshot(), live, statusEverySeconds: 1, columns: () => process.stdout.columns || 100 });
master.admitInputs();
const end = await loop.run(null, ending);
await loop.shutdown(null, end);
master.close();
con.close();
con = null;
process.stdout.write(`=== done: ${master.counters.observations} executions, ended ${end}\n`);
