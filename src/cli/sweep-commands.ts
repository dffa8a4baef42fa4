// Commands that write the sweep store: init, run, resweep, reset.
import { lstatSync } from "node:fs";
import { writeOutputFile } from "../files/output-file.ts";
import { availableParallelism } from "node:os";
import { dirname, relative } from "node:path";
import { Option, type Command } from "commander";
import { parseDuration } from "../config/duration.ts";
import { campaignPaths } from "../config/paths.ts";
import { initTemplate } from "../config/template.ts";
import { RefusedError } from "../errors.ts";
import { action, collect, intAtLeast } from "./action.ts";
import { EXIT } from "../exit-codes.ts";
import { makeConfirm } from "./prompt.ts";
import { bundledExample } from "./package-root.ts";
import { parseUiAddress } from "../ui/address.ts";
import { withSignalStop } from "./stop-signals.ts";

export function registerSweepCommands(program: Command): void {
  program
    .command("init")
    .description("write a commented starter fuzzfleet.toml (set up for the bundled example generator)")
    .option("--force", "overwrite an existing file")
    .action(
      action<{ force?: boolean }>((o) => {
        const { configPath } = campaignPaths(o);
        // lstat, not exists: a symlink there (dangling or not) is something, never written through.
        if (lstatSync(configPath, { throwIfNoEntry: false }) !== undefined && !o.force) {
          throw new RefusedError(`${configPath} already exists (--force to overwrite)`);
        }
        let example = relative(dirname(configPath), bundledExample("planted/planted.mjs"));
        if (!example.startsWith(".")) example = `./${example}`;
        const exampleDir = example.replace(/planted\.mjs$/, "");
        writeOutputFile(configPath, initTemplate().replaceAll("examples/planted/", exampleDir), { flag: "--config", what: "the config", mode: 0o644 });
        process.stdout.write(
          `wrote ${configPath}\n` +
            "  edit [generator] and the [lanes.NAME] tables for your generator, then:  fuzzfleet run --for 2h\n",
        );
        return EXIT.ok;
      }),
    );

  program
    .command("run")
    .description("sweep on this host for a time budget; Ctrl-C stops cleanly and the next run resumes")
    .option("--for <duration>", "time budget: 2h, 90m, 1h30m, 45s (a bare number is minutes)", "1h")
    .option("--lane <name>", "sweep only this lane (repeatable; may enable a lane the config disables)", collect, [])
    .option("-y, --yes", "answer yes to prompts (new generation, lane restart); needed without a terminal")
    .option("--allow-stale-app", "sweep even if [app] sources are newer than the app")
    .option("--force-unlock", "take over the campaign lock (only when you know its holder is dead)")
    .option("--status-every <duration>", "without a terminal: one status line this often (e.g. 30s, 5m; 0 = none)", "60s")
    .option("--ui <[host:]port>", "serve the live dashboard and /metrics here (a bare port is 127.0.0.1; 0 = a free port); off loopback it needs the campaign token (docs/dashboard.md)")
    .addHelpText(
      "after",
      `
Each chunk runs the [generator] command over a contiguous seed range of one lane. A lane's
coverage is [base_seed, cursor): it only grows when every seed below the new cursor is in a
completed chunk. Ctrl-C stops the running chunk; its range is swept again next time.
Chunks are sized to the time left, so a session fills its budget; none starts with less
than 5 s left (the deadline floor), so --for must be longer than that.
Exit: 0 no new distinct failure, 1 at least one newly distinct (or reopened) failure, 2 bad
config or flag, 3 refused (lock held, stale app, generator or lane changed without --yes),
4 runtime error, or every lane got disabled (timeouts, unexpected generator exits).`,
    )
    .action(
      action<{ for: string; lane: string[]; yes?: boolean; allowStaleApp?: boolean; forceUnlock?: boolean; ui?: string; statusEvery: string }>(async (o) => {
        const ui = o.ui === undefined ? null : parseUiAddress(o.ui);
        const statusEverySeconds = /^\s*(0+|off)\s*$/i.test(o.statusEvery) ? 0 : parseDuration(o.statusEvery);
        const { runSweep } = await import("../sweep/session/run.ts");
        return withSignalStop((stop) => runSweep({
          stop,
          paths: campaignPaths(o),
          seconds: parseDuration(o.for),
          laneNames: o.lane,
          allowStaleApp: o.allowStaleApp ?? false,
          forceUnlock: o.forceUnlock ?? false,
          confirm: makeConfirm(o.yes ?? false),
          live: process.stdout.isTTY === true && (process.stdout.columns ?? 0) > 0,
          statusEverySeconds,
          ui,
        }));
      }),
    );

  program
    .command("resweep")
    .description("re-check the seeds of open failures with [generator] check; close the ones that now pass")
    .option("--id <n>", "only this failure", intAtLeast(1))
    .addOption(new Option("-j, --jobs <n>", "passed to the check command as {jobs}").argParser(intAtLeast(1)).default(availableParallelism(), "this machine's cores"))
    .option("-v, --verbose", "after the summary, one line per failure (fixed, or still failing with its seeds)")
    .option("--force-unlock", "take over the campaign lock (only when you know its holder is dead)")
    .action(
      action<{ id?: number; jobs: number; verbose?: boolean; forceUnlock?: boolean }>(async (o) => {
        const { resweepCommand } = await import("../sweep/session/resweep.ts");
        return withSignalStop(({ signal }) => resweepCommand({ paths: campaignPaths(o), id: o.id ?? null, jobs: o.jobs, verbose: o.verbose ?? false, forceUnlock: o.forceUnlock ?? false, signal }));
      }),
    );

  program
    .command("reset")
    .description("start a new generation (every lane restarts), or restart one lane with --lane")
    .option("--lane <name>", "restart only this lane from its base_seed")
    .option("-y, --yes", "do not ask")
    .option("--force-unlock", "take over the campaign lock (only when you know its holder is dead)")
    .action(
      action<{ lane?: string; yes?: boolean; forceUnlock?: boolean }>(async (o) => {
        const { resetCommand } = await import("../sweep/session/reset.ts");
        return resetCommand({
          paths: campaignPaths(o),
          lane: o.lane ?? null,
          confirm: makeConfirm(o.yes ?? false),
          forceUnlock: o.forceUnlock ?? false,
        });
      }),
    );
}

