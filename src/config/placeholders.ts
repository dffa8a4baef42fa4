// The placeholder language of fuzzfleet.toml's argv templates: which `{name}`s each template may
// use, how they are found in an argument, and how a chunk's or check's values are filled in. The
// schema (schema.ts) rejects unknown names, so filling never meets one it cannot resolve.


/** Placeholders a chunk's command (generator.command + lane args) may use. */
export const CHUNK_PLACEHOLDERS = ["seed_from", "seed_to", "count", "jobs", "out", "max_shrinks"] as const;
/** Placeholders the resweep `check` command may use; {seeds} is a comma-separated seed list. */
export const CHECK_PLACEHOLDERS = ["seeds", "jobs"] as const;
/** Placeholders the `minimize` command may use: {seeds} (comma-separated) or {seed} (one per unit), {out}, {jobs}. */
export const MINIMIZE_PLACEHOLDERS = ["seeds", "seed", "out", "jobs"] as const;
/** Placeholders `generator.results` may use. */
export const RESULTS_PLACEHOLDERS = ["out"] as const;

// Only `{identifier}` is a placeholder, so arguments such as `{}` or `{"a":1}` pass through untouched.
const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** The placeholder names used in one template argument, in order of appearance. */
export function placeholdersIn(arg: string): string[] {
  return [...arg.matchAll(PLACEHOLDER)].map((m) => m[1]);
}

/**
 * Replaces every `{name}` in `arg` with `values[name]`. The config loader has already rejected
 * unknown names, so a placeholder without a value is a programming error and throws.
 */
export function fillPlaceholders(arg: string, values: Readonly<Record<string, string | number>>): string {
  return arg.replace(PLACEHOLDER, (_whole, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`no value for placeholder {${name}} in '${arg}'`);
    return String(value);
  });
}
