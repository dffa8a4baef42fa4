#!/usr/bin/env node
// fuzzfleet's command line. Each subcommand lives in its own file and only parses flags, calls
// the services and returns an exit code; errors map to exit codes in one table (exit-codes.ts).
import { Command, CommanderError } from "commander";
import { printable } from "../core/log-lines.ts";
import { FuzzfleetError, UsageError } from "../errors.ts";
import { EXIT, exitCodeFor } from "../exit-codes.ts";
import { actionExitCode } from "./action.ts";

type Register = (program: Command) => void;

// Each group of subcommands is loaded only when it is the one asked for (start-up time counts
// against every chunk of a sweep and every explore campaign); help without a command loads all.
const GROUPS: { commands: string[]; load: () => Promise<Register> }[] = [
  { commands: ["init", "run", "resweep", "reset"], load: async () => (await import("./sweep-commands.ts")).registerSweepCommands },
  { commands: ["status", "failures", "export"], load: async () => (await import("./report-commands.ts")).registerReportCommands },
  { commands: ["coordinate", "worker"], load: async () => (await import("./distributed-commands.ts")).registerDistributedCommands },
  { commands: ["explore"], load: async () => (await import("./explore-command.ts")).registerExplore },
  { commands: ["launch"], load: async () => (await import("./launch-command.ts")).registerLaunch },
  { commands: ["demo"], load: async () => (await import("./demo.ts")).registerDemo },
  { commands: ["ui", "report"], load: async () => (await import("./ui-commands.ts")).registerUiCommands },
];

/** Global options that take a value, so their value is not mistaken for the command. */
const VALUE_OPTIONS = new Set(["--config", "--db", "--out"]);

export function requestedCommand(args: readonly string[]): string | null {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === "--") return null;
    if (VALUE_OPTIONS.has(a)) {
      i++;
      continue;
    }
    if (a.startsWith("-")) continue;
    return a;
  }
  return null;
}

export async function buildProgram(args: readonly string[] = []): Promise<Command> {
  const program = new Command("fuzzfleet")
    .description(
      "Run fuzzing campaigns on one host or across a fleet, and never lie about what was covered. " +
        "A sweep turns integer seeds into tests through your generator, in lanes whose coverage is " +
        "always a contiguous prefix [base_seed, cursor) that survives Ctrl-C, crashes and restarts; " +
        "failures are deduplicated by their minimized input and kept in a SQLite store. " +
        "An explore campaign runs a target over a content-addressed corpus, executing every unique " +
        "input exactly once until the frontier is exhausted.",
    )
    .version(VERSION)
    .option("--config <path>", "campaign config file", "./fuzzfleet.toml")
    .option("--db <path>", "SQLite store (default: fuzzfleet.db beside the config)")
    .option("--out <dir>", "artifacts, logs and the lock (default: fuzzfleet-out/ beside the config)")
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ writeErr: writeUsageError })
    .exitOverride();
  program.addHelpText(
    "after",
    `
Getting started:
  fuzzfleet demo                      a real 45-second campaign on the bundled example generator
  fuzzfleet init                      write a commented fuzzfleet.toml to edit
  fuzzfleet run --for 2h              sweep; Ctrl-C stops cleanly, the next run resumes
  fuzzfleet status                    coverage per lane, failures, recent sessions
  fuzzfleet failures -v               the distinct failures, with their reports
  fuzzfleet run --for 2h --ui 8080    sweep with a live dashboard at http://127.0.0.1:8080/
  fuzzfleet ui                        browse a campaign's dashboard while nothing runs
  fuzzfleet report -o DIR             the same plots as a static HTML file
  fuzzfleet coordinate --for 12h      serve a sweep to workers on other hosts
  fuzzfleet worker --master H:P       pull and run chunks (or explore tasks) from a master
  fuzzfleet explore -i seeds -o corpus -j 2 -- ./target @@
                                      run a target over a corpus until nothing new is left
  fuzzfleet demo explore              the bundled maze target explored to quiescence

Environment:
  FUZZFLEET_SPAWN=node|native         how generators and targets are started: native (the default
                                      when built) is fuzzfleet's posix_spawn starter, node is
                                      child_process; see docs/explore.md
  FUZZFLEET_TOKEN                     the shared secret, when --token is not given

Exit codes: 0 ok, 1 'run'/'coordinate' recorded a newly distinct (or reopened) failure
(explore --fail-on-findings: a new crash or hang), 2 usage or config error, 3 refused (lock
held, stale app, declined prompt), 4 runtime error, 5 explore's wall budget ran out, 6 explore
interrupted (both keep the state for --resume), 70 lifecycle incomplete, 71 final rendezvous
timed out. See docs/exit-codes.md.`,
  );
  const wanted = requestedCommand(args);
  const group = GROUPS.find((g) => wanted !== null && g.commands.includes(wanted));
  // --version needs no command at all; help and an unknown command need every one listed.
  const versionOnly = wanted === null && args.some((a) => a === "--version" || a === "-V");
  for (const g of group ? [group] : versionOnly ? [] : GROUPS) (await g.load())(program);
  for (const cmd of program.commands) cmd.exitOverride().showHelpAfterError("(run with --help for usage)").configureOutput({ writeErr: writeUsageError });
  return program;
}

/** commander's own errors ("error: unknown command 'x'") in fuzzfleet's form: "fuzzfleet: unknown command 'x'". */
function writeUsageError(text: string): void {
  process.stderr.write(text.replace(/^error: /, "fuzzfleet: "));
}

const VERSION = "0.1.0";

/** Environment settings that would otherwise fail every child later, one by one. */
async function checkEnvironment(): Promise<void> {
  if (!process.env.FUZZFLEET_SPAWN) return;
  const { defaultStarter } = await import("../exec/native-spawn.ts");
  try {
    defaultStarter();
  } catch (err) {
    throw new UsageError(`${(err as Error).message}; unset it to let fuzzfleet choose`);
  }
}

export async function main(argv: string[]): Promise<number> {
  const program = await buildProgram(argv.slice(2));
  try {
    await checkEnvironment();
    await program.parseAsync(argv);
    return actionExitCode();
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version" || err.code === "commander.help") return EXIT.ok;
      return EXIT.usage;
    }
    if (err instanceof FuzzfleetError) {
      // Messages quote values from outside (files, peers, generators); each line reaches the terminal escaped.
      process.stderr.write(`fuzzfleet: ${err.message.split("\n").map((l) => printable(l, { max: 8000, tabs: true })).join("\n")}\n`);
      return exitCodeFor(err.code);
    }
    process.stderr.write(`fuzzfleet: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.runtime;
  }
}

// A reader that goes away (`fuzzfleet status | head`) must not crash a command, least of all a
// sweep that holds the lock: further output is simply dropped.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
  });
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`fuzzfleet: ${String(err)}\n`);
    process.exitCode = EXIT.runtime;
  },
);
