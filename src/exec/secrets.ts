// What of fuzzfleet's secrets a child must never see, and what of a child's output must never be
// kept or shown.
//
// The environment: every child fuzzfleet starts (generators, minimizers, checks, explore targets)
// gets its environment through childEnvironment, which startChild applies to whatever it is given,
// so no caller can forget it. It removes the variables that carry a secret of fuzzfleet's own:
// the names in SECRET_ENV_NAMES and any other FUZZFLEET_…_TOKEN (fuzzfleet's namespace, so no
// variable of the user's is touched). A generator or a target has no use for the campaign token,
// and one that dumps its environment (a crash handler, `env` in a script) would otherwise put it
// into its log, into a finding's output tail, and from there into reports and exported bundles.
//
// The output: a child can still learn the token another way (it runs as the same user, and may
// read the token file), so what fuzzfleet keeps of its output is redacted as well. A Redact is
// built by the command that resolved the token and handed to whatever records the output; no
// global holds a secret.

/** Variables that carry a secret of fuzzfleet's: never passed to a child. */
export const SECRET_ENV_NAMES: readonly string[] = ["FUZZFLEET_TOKEN", "FUZZFLEET_SCRAPE_TOKEN"];

/** What a secret is replaced with in a child's output. */
export const REDACTED = "[redacted]";

/** No campaign token is shorter (net/token.ts): a shorter value could only match by chance. */
const TOKEN_MIN_CHARS = 8;

/** The shortest piece of a secret, cut at the edge of a tail, that is redacted as such. */
const MIN_FRAGMENT = 4;

export function isSecretEnvName(name: string): boolean {
  return SECRET_ENV_NAMES.includes(name) || /^FUZZFLEET_\w*TOKEN$/.test(name);
}

// An environment that cannot change any more (explore builds one per scratch directory and uses
// it for every run) is cleaned once.
const cleanedFrozen = new WeakMap<object, NodeJS.ProcessEnv>();

/**
 * `base` without its secret variables: `base` itself when it has none (no copy), else a copy,
 * frozen if `base` was. Everything else, the user's own variables included, is passed unchanged.
 */
export function childEnvironment(base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const known = cleanedFrozen.get(base);
  if (known) return known;
  let env = base;
  for (const name of Object.keys(base)) {
    if (!isSecretEnvName(name)) continue;
    if (env === base) env = { ...base };
    delete env[name];
  }
  if (Object.isFrozen(base)) {
    if (env !== base) Object.freeze(env);
    cleanedFrozen.set(base, env);
  }
  return env;
}

/** The values of `env`'s secret variables that are long enough to be a token. */
export function secretValues(env: NodeJS.ProcessEnv): string[] {
  return Object.entries(env)
    .filter(([name, value]) => isSecretEnvName(name) && value !== undefined)
    .map(([, value]) => value!.trim())
    .filter((v) => v.length >= TOKEN_MIN_CHARS);
}

/** Replaces every secret it knows in a text (a child's output) with REDACTED. */
export type Redact = (text: string) => string;

/** Leaves every text as it is: nothing to hide. */
export const redactNothing: Redact = (text) => text;

/**
 * A Redact for `secrets` (empty, undefined and null entries ignored, and so is anything shorter
 * than a token can be, which could only match by chance). Besides whole occurrences, a text that
 * begins with the end of a secret or ends with its beginning (a tail cut in the middle of the
 * token) has that piece redacted too, from MIN_FRAGMENT characters on.
 */
export function redactor(secrets: Iterable<string | null | undefined>): Redact {
  const known = [...new Set([...secrets].filter((s): s is string => typeof s === "string" && s.length >= TOKEN_MIN_CHARS))];
  if (known.length === 0) return redactNothing;
  // Longest first: a secret that contains another is replaced whole.
  known.sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const s of known) if (out.includes(s)) out = out.split(s).join(REDACTED);
    for (const s of known) {
      for (let n = s.length - 1; n >= MIN_FRAGMENT; n--) {
        if (out.startsWith(s.slice(s.length - n))) {
          out = REDACTED + out.slice(n);
          break;
        }
      }
      for (let n = s.length - 1; n >= MIN_FRAGMENT; n--) {
        if (out.endsWith(s.slice(0, n))) {
          out = out.slice(0, out.length - n) + REDACTED;
          break;
        }
      }
    }
    return out;
  };
}
