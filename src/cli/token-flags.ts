// The two flags that give a command the campaign token, worded once for every command that takes
// them. --token puts the secret into the process list, where every local user can read it; its
// help says so and points to the two ways that do not (net/token.ts resolves all of them).
import { dirname, resolve } from "node:path";
import { Option } from "commander";
import { serverToken } from "../net/token.ts";

/** What every --token help line ends with. */
export const TOKEN_IN_PS = "visible to other local users in `ps`: prefer --token-file or $FUZZFLEET_TOKEN";

/** --token <t>: `what` says what it is and its default. */
export function tokenOption(what: string): Option {
  return new Option("--token <t>", `${what}; ${TOKEN_IN_PS}`);
}

/** --token-file <path>, made absolute where it is given. */
export function tokenFileOption(what: string): Option {
  return new Option("--token-file <path>", what).argParser((value: string) => resolve(value));
}

/**
 * For a server's --token-file: refuses a missing or untrustworthy file (or one given beside
 * --token) before the command takes a lock or creates anything; the server reads it again where
 * it resolves its token.
 */
export function checkTokenFile(flag: string | undefined, path: string | undefined): void {
  // With a file given, serverToken only reads: it creates nothing.
  if (path !== undefined) serverToken({ flag, file: path, outDir: dirname(path), env: {} });
}
