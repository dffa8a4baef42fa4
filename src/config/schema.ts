// The shape of fuzzfleet.toml (zod) and the resolved Config that the rest of the program reads.
// The placeholder language of its argv templates is placeholders.ts; the checks that read more than
// one key, and the turning of zod's issues into the loader's, are validate.ts; file I/O and error
// rendering live in load.ts.

import { availableParallelism } from "node:os";
import { z } from "zod";
import { LAST_SEED } from "../core/ranges.ts";
import { CHECK_PLACEHOLDERS, CHUNK_PLACEHOLDERS, MINIMIZE_PLACEHOLDERS, placeholdersIn, RESULTS_PLACEHOLDERS } from "./placeholders.ts";

// ---------------------------------------------------------------------------------------------
// Placeholder checks (the language itself is placeholders.ts)

function listPlaceholders(names: readonly string[]): string {
  return names.map((n) => `{${n}}`).join(", ");
}

/** Issue params flag: the offending value is obvious from the message, do not print "(got …)". */
const NO_GOT = { noGot: true } as const;

function checkPlaceholders(args: readonly string[], allowed: readonly string[], ctx: z.RefinementCtx): void {
  args.forEach((arg, i) => {
    for (const name of placeholdersIn(arg)) {
      if (!allowed.includes(name)) {
        ctx.addIssue({
          code: "custom",
          path: [i],
          message: `unknown placeholder {${name}} (known: ${listPlaceholders(allowed)})`,
        });
      }
    }
  });
}

function usesPlaceholder(args: readonly string[], name: string): boolean {
  return args.some((arg) => placeholdersIn(arg).includes(name));
}

// ---------------------------------------------------------------------------------------------
// Field types. Each carries one message for every way it can fail, stating what is expected.

function int(lo: number, hi: number = Number.MAX_SAFE_INTEGER) {
  const expected = hi === Number.MAX_SAFE_INTEGER ? `expected an integer >= ${lo}` : `expected an integer from ${lo} to ${hi}`;
  return z.int({ error: expected }).min(lo).max(hi);
}

/**
 * A lane's first seed. Seeds are exact JavaScript integers (core/ranges.ts): the last one a chunk
 * may hold is LAST_SEED, so a lane must start at or below it to have a seed to sweep.
 */
function seed() {
  const expected = `expected a seed from 0 to ${LAST_SEED} (2^53 - 2, the last seed counted exactly); lower it`;
  return z.int({ error: expected }).min(0, { error: expected }).max(LAST_SEED, { error: expected });
}

function positiveNumber() {
  return z.number({ error: "expected a number > 0" }).positive();
}

function nonNegativeNumber() {
  return z.number({ error: "expected a number >= 0" }).min(0);
}

function bool() {
  return z.boolean({ error: "expected true or false" });
}

function stringList(what: string) {
  return z.array(z.string({ error: "expected a string" }), { error: `expected ${what}` });
}

function argvTemplate(allowed: readonly string[]) {
  return stringList("a non-empty array of strings (an argv template)")
    .min(1, { error: "expected a non-empty array of strings (an argv template)" })
    .superRefine((argv, ctx) => {
      if (argv[0] === "") ctx.addIssue({ code: "custom", path: [0], message: "expected a program name" });
      checkPlaceholders(argv, allowed, ctx);
    });
}

// ---------------------------------------------------------------------------------------------
// The file

export const LANE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const DefaultsSchema = z.strictObject(
  {
    // One job per core of this machine unless the config says otherwise.
    jobs: int(1, 1024).default(() => availableParallelism()),
    nice: int(0, 19).default(19),
    idle_io: bool().default(true),
    chunk_minutes: positiveNumber().default(10),
    bootstrap_seeds: int(1).default(40),
    max_shrinks: int(0).default(20),
    hard_timeout_floor: positiveNumber().default(180),
  },
  { error: "expected a table" },
);

const GeneratorSchema = z.strictObject(
  {
    command: argvTemplate(CHUNK_PLACEHOLDERS),
    identity: z
      .array(z.string({ error: "expected a file path" }).min(1, { error: "expected a file path" }), {
        error: "expected a non-empty array of file paths",
      })
      .min(1, { error: "expected a non-empty array of file paths" }),
    results: z
      .string({ error: "expected a path template such as \"{out}\"" })
      .superRefine((results, ctx) => {
        for (const name of placeholdersIn(results)) {
          if (!(RESULTS_PLACEHOLDERS as readonly string[]).includes(name)) {
            ctx.addIssue({ code: "custom", message: `unknown placeholder {${name}} (known: {out})` });
          }
        }
        if (!placeholdersIn(results).includes("out")) {
          ctx.addIssue({
            code: "custom",
            message: "must lie inside the chunk's output dir, so it must use {out} (for example \"{out}\" or \"{out}/run-000000\")",
          });
        }
      })
      .default("{out}"),
    check: argvTemplate(CHECK_PLACEHOLDERS)
      .superRefine((argv, ctx) => {
        if (argv.length > 0 && !usesPlaceholder(argv, "seeds")) {
          ctx.addIssue({
            code: "custom",
            message: "must use {seeds} (the comma-separated list of seeds to re-check)",
            params: NO_GOT,
          });
        }
      })
      .optional(),
    minimize: argvTemplate(MINIMIZE_PLACEHOLDERS)
      .superRefine((argv, ctx) => {
        if (argv.length === 0) return;
        const seeds = usesPlaceholder(argv, "seeds");
        const seed = usesPlaceholder(argv, "seed");
        if (seeds === seed) {
          ctx.addIssue({
            code: "custom",
            message: seeds
              ? "uses both {seeds} and {seed}: use {seeds} (a comma-separated list) or {seed} (one find per invocation)"
              : "must use {seeds} (a comma-separated list of the seeds to minimize) or {seed} (one per invocation)",
            params: NO_GOT,
          });
        }
        if (!usesPlaceholder(argv, "out")) {
          ctx.addIssue({ code: "custom", message: "must use {out} (where the minimized failures/<seed>/ entries are written)", params: NO_GOT });
        }
      })
      .optional(),
  },
  { error: "expected a [generator] table with command and identity" },
);

const MinimizeSchema = z.strictObject(
  {
    share: z.number({ error: "expected a number from 0 to 1" }).min(0).max(1).default(0.25),
    batch: int(1, 10_000).default(16),
    timeout_minutes: positiveNumber().default(10),
  },
  { error: "expected a table" },
);

const AppSchema = z.strictObject(
  {
    path: z.string({ error: "expected the path of the system under test" }).min(1, {
      error: "expected the path of the system under test",
    }),
    sources: stringList("an array of glob patterns").default([]),
  },
  { error: "expected a table" },
);

const LaneSchema = z.strictObject(
  {
    base_seed: seed().default(1),
    weight: nonNegativeNumber().default(1),
    enabled: bool().default(true),
    jobs: int(1, 1024).optional(),
    args: stringList("an array of strings")
      .superRefine((args, ctx) => checkPlaceholders(args, CHUNK_PLACEHOLDERS, ctx))
      .default([]),
  },
  { error: "expected a [lanes.NAME] table" },
);

const MIB = 1 << 20;

/** The caps on what a worker without the shared directory sends of one unit (failures/ and quarantine/ files). */
export interface TransferCaps {
  maxFiles: number;
  maxBytes: number;
  maxFileBytes: number;
}

/** [distributed] transfer_max_files, transfer_max_mib, transfer_max_file_mib unless set. */
export const TRANSFER_DEFAULTS: TransferCaps = { maxFiles: 10_000, maxBytes: 2048 * MIB, maxFileBytes: 512 * MIB };

/** The caps a file sets, in bytes (whole bytes: a fraction of a MiB is rounded down). */
export function transferCaps(d: { transfer_max_files: number; transfer_max_mib: number; transfer_max_file_mib: number }): TransferCaps {
  return { maxFiles: d.transfer_max_files, maxBytes: Math.floor(d.transfer_max_mib * MIB), maxFileBytes: Math.floor(d.transfer_max_file_mib * MIB) };
}

const DistributedSchema = z.strictObject(
  {
    port: int(0, 65535).default(9999),
    bind: z.string({ error: "expected a host name or address (\"\" = this host's name)" }).default(""),
    lease_seconds: positiveNumber().default(120),
    drain_grace_minutes: nonNegativeNumber().default(35),
    stop_grace_seconds: positiveNumber().default(15),
    // What a worker without the shared directory may send of one chunk or minimize unit.
    transfer_max_files: int(0, 10_000_000).default(TRANSFER_DEFAULTS.maxFiles),
    transfer_max_mib: positiveNumber().default(TRANSFER_DEFAULTS.maxBytes / MIB),
    transfer_max_file_mib: positiveNumber().default(TRANSFER_DEFAULTS.maxFileBytes / MIB),
  },
  { error: "expected a table" },
);

const StoreSchema = z.strictObject(
  {
    journal: z.enum(["auto", "wal", "truncate"], { error: 'expected "auto", "wal" or "truncate"' }).default("auto"),
    give_up_minutes: positiveNumber().default(10),
  },
  { error: "expected a table" },
);

export const ConfigFileSchema = z.strictObject({
  defaults: DefaultsSchema.prefault({}),
  generator: GeneratorSchema,
  app: AppSchema.optional(),
  // Lane names are checked separately (validateConfigDocument) so that a badly named lane's
  // keys are still validated and reported in the same run.
  lanes: z.record(z.string(), LaneSchema, { error: "expected [lanes.NAME] tables" }).default({}),
  distributed: DistributedSchema.prefault({}),
  store: StoreSchema.prefault({}),
  minimize: MinimizeSchema.prefault({}),
});

/** fuzzfleet.toml as validated, before defaults that depend on other keys and path resolution. */
export type ConfigFile = z.output<typeof ConfigFileSchema>;

const KNOWN_KEYS: Record<string, readonly string[]> = {
  "": Object.keys(ConfigFileSchema.shape),
  defaults: Object.keys(DefaultsSchema.shape),
  generator: Object.keys(GeneratorSchema.shape),
  app: Object.keys(AppSchema.shape),
  distributed: Object.keys(DistributedSchema.shape),
  store: Object.keys(StoreSchema.shape),
  minimize: Object.keys(MinimizeSchema.shape),
};

/** The keys a table at `tablePath` accepts, or undefined if it is not a table of the schema. */
export function knownKeys(tablePath: readonly (string | number)[]): readonly string[] | undefined {
  if (tablePath.length === 2 && tablePath[0] === "lanes") return Object.keys(LaneSchema.shape);
  if (tablePath.length > 1) return undefined;
  return KNOWN_KEYS[tablePath.length === 0 ? "" : String(tablePath[0])];
}

// ---------------------------------------------------------------------------------------------
// The resolved configuration

export interface LaneConfig {
  name: string;
  baseSeed: number;
  weight: number;
  enabled: boolean;
  jobs: number;
  args: string[];
}

export interface Config {
  /** Absolute path of the file and its directory. */
  path: string;
  dir: string;
  defaults: {
    jobs: number;
    nice: number;
    idleIo: boolean;
    /** round(chunk_minutes * 60), at least 1. */
    chunkSeconds: number;
    bootstrapSeeds: number;
    maxShrinks: number;
    /** A chunk's hard timeout is max(this, 3 x its target seconds). */
    hardTimeoutFloor: number;
  };
  generator: {
    /** argv template; runs with cwd = the config dir. */
    command: string[];
    /** Absolute paths of the files whose bytes make the generation id. */
    identity: string[];
    /** Template of the dir holding failures/ and quarantine/; uses {out}. */
    results: string;
    check: string[] | null;
  };
  app: { path: string; sources: string[] } | null;
  /** In file order, which is the tie-break order for lane picking. */
  lanes: LaneConfig[];
  distributed: {
    port: number;
    bind: string;
    leaseSeconds: number;
    drainGraceMinutes: number;
    stopGraceSeconds: number;
    /** Caps on a unit's files from a worker without the shared directory; TRANSFER_DEFAULTS when absent. */
    transfer?: TransferCaps;
  };
  store: {
    /** The journal mode writers keep the file in; "auto" = WAL on a local file system, TRUNCATE on a network one. */
    journal: "auto" | "wal" | "truncate";
    /** How long a session keeps retrying commits the store refuses (locked, full, read-only) before it ends. */
    giveUpSeconds: number;
  };
  /** Present only with `[generator] minimize`; without it, unshrunk finds stay pending minimization. */
  minimize?: {
    /** argv template run for finds pending minimization ({seeds} or {seed}, {out}, {jobs}). */
    command: string[];
    /**
     * Share of the executing slots given to minimize units while chunks run: on a single host,
     * the minimizer's {jobs} is max(1, round(share x jobs)) beside the chunk; across workers, at
     * most ceil(share x workers) run one at a time. 0: only slots with nothing else to do.
     */
    share: number;
    /** Finds per minimize unit ({seeds}); 1 when the template uses {seed}. */
    batch: number;
    timeoutSeconds: number;
  };
}

/**
 * The lane's identity: canonical JSON of the keys that decide which tests its seeds produce,
 * `{"args":[...],"base_seed":N}` with sorted keys. When it changes, the lane restarts from its
 * base seed. weight, enabled and jobs only steer scheduling and are not part of it.
 */
export function laneIdentity(lane: LaneConfig): string {
  return JSON.stringify({ args: lane.args, base_seed: lane.baseSeed });
}
