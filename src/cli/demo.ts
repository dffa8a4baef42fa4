// `demo`: a real sweep campaign on the bundled example generator, in a fresh directory, ending
// with the same status and failures reports a user would ask for.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { constants as osConstants, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Command } from "commander";
import { parseDuration } from "../config/duration.ts";
import { campaignPaths } from "../config/paths.ts";
import { stateDir } from "../explore/state/work-dir.ts";
import { RefusedError, UsageError } from "../errors.ts";
import { openSweepStore } from "../store/sqlite/index.ts";
import { failuresData, renderFailures } from "../sweep/views/failures.ts";
import { renderStatus, statusData } from "../sweep/views/status.ts";
import { runSweep } from "../sweep/session/run.ts";
import { action } from "./action.ts";
import { EXIT } from "../exit-codes.ts";
import { makeConfirm } from "./prompt.ts";
import { bundledExample } from "./package-root.ts";
import { withSignalStop } from "./stop-signals.ts";

export function demoConfig(plantedPath: string): string {
  const gen = JSON.stringify(plantedPath);
  const identity = JSON.stringify(plantedPath.replace(/planted\.mjs$/, "*.mjs"));
  return `# fuzzfleet demo campaign: the bundled planted-bug generator, short chunks.
[defaults]
jobs = 2
nice = 10
chunk_minutes = 0.1
bootstrap_seeds = 200
max_shrinks = 50
hard_timeout_floor = 60

[generator]
command = ["node", ${gen}, "--from", "{seed_from}", "--count", "{count}", "--jobs", "{jobs}",
           "--out", "{out}", "--max-shrinks", "{max_shrinks}"]
identity = [${identity}]
check = ["node", ${gen}, "--check", "--seeds", "{seeds}", "--json"]

[lanes.small]
base_seed = 1
weight = 2
args = ["--size", "small"]

[lanes.large]
base_seed = 1000000
weight = 1
args = ["--size", "large"]
`;
}

/**
 * The planted generator emits one invalid test in a thousand on purpose, to show the quarantine:
 * the demo says so instead of the warning a real generator deserves.
 */
const PLANTED_QUARANTINE =
  "invalid tests the planted generator emits on purpose (1 in 1,000, to show the quarantine; examples/planted/README.md). With your own generator, a quarantine count means a bug in the generator";

function keptAt(dir: string): string {
  return `\nThe demo's files stay in ${dir} (remove them with: rm -rf ${dir})`;
}

/** What the maze's crashes mean, in the numbers its findings store holds. */
function mazeCrashes(findings: readonly { signal: number | null }[]): string {
  const abort = findings.filter((f) => f.signal === osConstants.signals.SIGABRT).length;
  const segv = findings.filter((f) => f.signal === osConstants.signals.SIGSEGV).length;
  if (findings.length === 0) return "None of them crashed the maze; examples/maze/README.md says which inputs do.";
  const parts = [
    `${abort} by SIGABRT at the treasure`,
    `${segv} by SIGSEGV where a dash leaves the map`,
    ...(findings.length > abort + segv ? [`${findings.length - abort - segv} otherwise`] : []),
  ];
  return `${findings.length} of them crash the maze, and each is a finding: ${parts.join(", ")}; examples/maze/README.md explains them.`;
}

/** The maze explored to quiescence with two local slots; its findings in words. */
async function exploreDemo(dir: string): Promise<number> {
  const say = (line: string) => process.stdout.write(line + "\n");
  const seeds = join(dir, "seeds");
  mkdirSync(seeds);
  for (const name of readdirSync(bundledExample("maze/seeds"))) copyFileSync(join(bundledExample("maze/seeds"), name), join(seeds, name));
  const corpus = join(dir, "corpus");
  const target = ["node", bundledExample("maze/maze.mjs"), "@@"];
  say(`demo explore campaign in ${dir}`);
  say(`$ fuzzfleet explore -i ${seeds} -o ${corpus} -j 2 --max-idle 1 -- ${target.join(" ")}\n`);
  const { explore } = await import("../explore/command/run.ts");
  return withSignalStop(async ({ signal }) => {
    const code = await explore({
      inputDir: seeds,
      corpusDir: corpus,
      target,
      slots: 2,
      timeoutSeconds: 10,
      maxIdleSeconds: 1,
      wallTimeoutSeconds: 0,
      simulate: false,
      port: null,
      bind: null,
      token: undefined,
      statsJson: join(dir, "stats.json"),
      resumeEpoch: null,
      leaseTtlSeconds: null,
      signal,
    });
    const { exploreFindingsData } = await import("../explore/views/findings.ts");
    // A campaign stopped before its first commit leaves no state to read findings from.
    const findings = existsSync(stateDir(corpus)) ? exploreFindingsData(corpus).signatures.flatMap((s) => s.findings) : [];
    say(`\nThe corpus holds every unique input the maze reached, each executed once: ls ${corpus}`);
    say(mazeCrashes(findings));
    if (findings.length > 0) say(`Next: fuzzfleet failures --corpus ${corpus} -v   shows each crash with the maze's last words`);
    say(keptAt(dir));
    return code;
  });
}

export function registerDemo(program: Command): void {
  program
    .command("demo")
    .description("run a real campaign on a bundled example in a fresh directory: a sweep (default) or an explore")
    .argument("[kind]", "sweep: the planted-bug generator, then status and failures; explore: the maze target to quiescence and its crashes as findings", "sweep")
    .option("--for <duration>", "how long to sweep", "45s")
    .option("--dir <dir>", "campaign directory (must not exist or be empty; default: a new temporary directory)")
    .action(
      action<{ for: string; dir?: string }>(async (o, cmd) => {
        const kind = cmd.args[0] ?? "sweep";
        if (kind !== "sweep" && kind !== "explore") throw new UsageError(`demo wants 'sweep' or 'explore' (got '${kind}')`);
        const seconds = parseDuration(o.for);
        const dir = o.dir ? resolve(o.dir) : mkdtempSync(join(tmpdir(), "fuzzfleet-demo-"));
        if (o.dir) {
          if (existsSync(dir) && readdirSync(dir).length > 0) {
            throw new RefusedError(`--dir ${dir} is not empty; the demo starts from a fresh directory (pick another or remove it)`);
          }
          mkdirSync(dir, { recursive: true });
        }
        if (kind === "explore") return exploreDemo(dir);
        const configPath = join(dir, "fuzzfleet.toml");
        writeFileSync(configPath, demoConfig(bundledExample("planted/planted.mjs")));
        const paths = campaignPaths({ config: configPath });
        const say = (line: string) => process.stdout.write(line + "\n");
        say(`demo campaign in ${dir}`);
        say(`  config ${configPath}: two lanes of the planted-bug generator, ~6 s chunks\n`);
        await withSignalStop((stop) => runSweep({
          stop,
          paths,
          seconds,
          laneNames: [],
          allowStaleApp: false,
          forceUnlock: false,
          confirm: makeConfirm(true, process.stdin, process.stderr),
          live: process.stdout.isTTY === true && (process.stdout.columns ?? 0) > 0,
          quarantineNote: PLANTED_QUARANTINE,
        }));
        const store = openSweepStore(paths.dbPath, { readonly: true });
        try {
          say(`\n$ fuzzfleet --config ${configPath} status`);
          process.stdout.write(renderStatus(statusData(store, { genHashNow: null, appBuildNow: null, outDir: paths.outDir }), { quarantineNote: PLANTED_QUARANTINE }));
          say(`\n$ fuzzfleet --config ${configPath} failures`);
          process.stdout.write(renderFailures(failuresData(store, paths.outDir, { state: "open", bucket: null, allGenerations: false }), { verbose: false, lines: 30 }));
        } finally {
          store.close();
        }
        say(`\nNext: run it again to resume at the cursors, or try  fuzzfleet --config ${configPath} failures -v`);
        say(`      PLANTED_FIX=crash fuzzfleet --config ${configPath} resweep   closes the 'crash' failures`);
        say(keptAt(dir));
        return EXIT.ok;
      }),
    );
}
