#!/usr/bin/env node
// fuzzfleet's command line. Each subcommand lives in its own file and only parses flags, calls
// the services and returns an exit code; errors map to exit codes in one table (exit-codes.ts).
import { Command, CommanderError } from "commander";
import { FuzzfleetError } from "../errors.ts";
import { EXIT, exitCodeFor } from "./exit-codes.ts";
import { actionExitCode } from "./action.ts";
import { registerSweepCommands } from "./sweep-commands.ts";
import { registerReportCommands } from "./report-commands.ts";
import { registerDemo } from "./demo.ts";
import { registerDistributedCommands } from "./distributed-commands.ts";
import { registerExplore } from "./explore-command.ts";

export function buildProgram(): Command {
  const program = new Command("fuzzfleet")
    .description(
      "Run fuzzing campaigns on one host or across a fleet, and never lie about what was covered. " +
        "A sweep turns integer seeds into tests through your generator, in lanes whose coverage is " +
        "always a contiguous prefix [base_seed, cursor) that survives Ctrl-C, crashes and restarts; " +
        "failures are deduplicated by their minimized input and kept in a SQLite store.",
    )
    .version(VERSION)
    .option("--config <path>", "campaign config file", "./fuzzfleet.toml")
    .option("--db <path>", "SQLite store (default: fuzzfleet.db beside the config)")
    .option("--out <dir>", "artifacts, logs and the lock (default: fuzzfleet-out/ beside the config)")
    .showHelpAfterError("(run with --help for usage)")
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
  fuzzfleet coordinate --for 12h      serve a sweep to workers on other hosts
  fuzzfleet worker --master H:P -j 12 pull and run chunks from a coordinator

Exit codes: 0 ok, 1 'run' recorded a newly distinct failure, 2 usage or config error,
3 refused (lock held, stale app, declined prompt), 4 runtime error. See docs/exit-codes.md.`,
  );
  registerSweepCommands(program);
  registerReportCommands(program);
  registerDistributedCommands(program);
  registerExplore(program);
  registerDemo(program);
  for (const cmd of program.commands) cmd.exitOverride().showHelpAfterError("(run with --help for usage)");
  return program;
}

const VERSION = "0.1.0";

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return actionExitCode();
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version" || err.code === "commander.help") return EXIT.ok;
      return EXIT.usage;
    }
    if (err instanceof FuzzfleetError) {
      process.stderr.write(`fuzzfleet: ${err.message}\n`);
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
