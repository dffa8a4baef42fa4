// Subcommand actions return their exit code; main() reads it after parsing.
import { InvalidArgumentError, type Command } from "commander";
import type { GlobalOptions } from "../config/paths.ts";
import { parseSeconds } from "../config/duration.ts";
import { UsageError } from "../errors.ts";

let exitCode = 0;

/** Wraps an action so it receives the merged global + local options and reports an exit code. */
export function action<O>(fn: (opts: O & GlobalOptions, cmd: Command) => Promise<number> | number) {
  return async (...args: unknown[]): Promise<void> => {
    const cmd = args[args.length - 1] as Command;
    exitCode = await fn(cmd.optsWithGlobals() as O & GlobalOptions, cmd);
  };
}

export function actionExitCode(): number {
  return exitCode;
}

/** commander argument parser for a TCP port, 0 (a free one) to 65535. */
export function portNumber(value: string): number {
  const n = intAtLeast(0)(value);
  if (n > 65535) throw new InvalidArgumentError("expected a port from 0 to 65535");
  return n;
}

/** commander collector for a repeatable option. */
export function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** commander argument parser for integers >= min; commander names the flag and the value. */
export function intAtLeast(min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`expected an integer >= ${min}`);
    }
    return n;
  };
}

/** --wait: plain seconds (as it always took), or a duration with units like the other duration flags. */
export function waitSeconds(value: string): number {
  const seconds = parseSeconds(value);
  if (seconds === null || seconds < 0) throw new UsageError(`--wait wants seconds or a duration such as 15s, 2m or 1h (got '${value}')`);
  return seconds;
}
