// Read-only commands: status, failures, export. They open the store read-only (never creating or
// migrating it), take no lock, and refuse to read a store that another host's campaign owns.
// Without a store they say that nothing was swept yet and exit 0.
import { existsSync } from "node:fs";
import { Option, type Command } from "commander";
import type { Config } from "../config/load.ts";
import { loadConfig } from "../config/load.ts";
import { campaignPaths, type CampaignPaths } from "../config/paths.ts";
import { refuseIfRemoteCampaign } from "../lock/campaign-lock.ts";
import { FAILURE_STATES, type SweepStore } from "../store/port.ts";
import { openSweepStore } from "../store/sqlite/index.ts";
import { exportBundle, sweepKeptOut } from "../sweep/views/export.ts";
import { exploreKeptOut } from "../explore/state/work-dir.ts";
import { writeOutputFile, type KeptOut } from "../files/output-file.ts";
import { DEFAULT_PAGING, effectiveFilters, failuresData, NOTHING_RECORDED, renderFailures, type FailureFilters } from "../sweep/views/failures.ts";
import { emptyStatus, renderStatus, statusData, type StatusContext } from "../sweep/views/status.ts";
import { ConfigError, UsageError } from "../errors.ts";
import { appBuildId, tryGenerationHash } from "../config/identity.ts";
import { action, intAtLeast } from "./action.ts";
import { parseHostPort } from "../net/address.ts";
import { remoteRead } from "../net/read-client.ts";
import { clientToken } from "../net/token.ts";
import { tokenFileOption, tokenOption } from "./token-flags.ts";
import { EXIT } from "../exit-codes.ts";

/** An explore corpus's findings (and the explore state modules they read) load only for --corpus. */
const loadExploreFindings = () => import("../explore/views/findings.ts");

/** The config, or why there is none: missing, or an error that names the file, line and key. */
function readConfig(paths: CampaignPaths): { config: Config | null; problem: ConfigError | null; missing: boolean } {
  if (!existsSync(paths.configPath)) return { config: null, problem: null, missing: true };
  try {
    return { config: loadConfig(paths.configPath), problem: null, missing: false };
  } catch (err) {
    if (err instanceof ConfigError) return { config: null, problem: err, missing: false };
    throw err;
  }
}

/**
 * What `status`, `failures` and `export` say when there is no store: the real state. No config and no store is no
 * campaign at all; a broken config is reported as every command reports it; a config with no
 * store yet is a campaign that has not swept.
 */
function refuseWithoutCampaign(paths: CampaignPaths, found: ReturnType<typeof readConfig>): void {
  if (found.problem) throw found.problem;
  if (found.missing) {
    throw new ConfigError(
      `no campaign here: neither ${paths.configPath} nor ${paths.dbPath} exists. ` +
        "'fuzzfleet init' writes a config to start from (then 'fuzzfleet run --for 30m'), or point --config at an existing campaign",
    );
  }
}

function optionalAppBuild(config: Config | null): string | null {
  if (!config?.app) return null;
  try {
    return appBuildId(config);
  } catch {
    return "MISSING";
  }
}

function printRead(reply: { type: "text"; text: string } | { type: "json"; data: unknown }): void {
  process.stdout.write(reply.type === "json" ? JSON.stringify(reply.data, null, 2) + "\n" : reply.text);
}

const stateOption = () =>
  new Option("--state <state>", "which failures; stale implies --all-generations (stale failures belong to earlier generations)")
    .choices([...FAILURE_STATES, "all"])
    .default("open");

const allGenerationsHelp = "include earlier generations (implied by --state stale)";

export function registerReportCommands(program: Command): void {
  program
    .command("status")
    .description("coverage per lane, failures by bucket, recent sessions")
    .option("--json", "print the same data as one JSON object")
    .option("--master <host:port>", "ask a running coordinator instead of reading the store (adds live workers and chunks in flight)")
    .addOption(tokenOption("with --master: the shared secret (default: $FUZZFLEET_TOKEN, else <out>/fuzzfleet.token)"))
    .addOption(tokenFileOption("with --master: read the shared secret from this file"))
    .action(
      action<{ json?: boolean; master?: string; token?: string; tokenFile?: string }>(async (o) => {
        const paths = campaignPaths(o);
        if (o.master) {
          const { host, port } = parseHostPort(o.master);
          const token = clientToken({ flag: o.token, file: o.tokenFile, outDir: paths.outDir });
          printRead(await remoteRead(host, port, { type: "status", token, json: o.json ?? false }));
          return EXIT.ok;
        }
        refuseIfRemoteCampaign(paths.outDir, "status");
        const found = readConfig(paths);
        if (!existsSync(paths.dbPath)) refuseWithoutCampaign(paths, found);
        else if (found.problem) process.stderr.write(`fuzzfleet: warning: ${found.problem.message}\n  (the report below comes from the store alone)\n`);
        const config = found.config;
        const ctx: StatusContext = {
          genHashNow: null,
          appBuildNow: optionalAppBuild(config),
          outDir: paths.outDir,
          laneOrder: config?.lanes.map((l) => l.name) ?? null,
          configured: config?.lanes ?? null,
        };
        const data = withReadStore(
          paths.dbPath,
          () => emptyStatus(ctx),
          (store) => {
            // Hashing the generator's files is only worth it when there is a generation to compare.
            ctx.genHashNow = config ? tryGenerationHash(config) : null;
            return statusData(store, ctx);
          },
        );
        process.stdout.write(o.json ? JSON.stringify(data, null, 2) + "\n" : renderStatus(data));
        return EXIT.ok;
      }),
    );

  program
    .command("failures")
    .description("the distinct failures of the current generation (open ones by default)")
    .addOption(stateOption())
    .option("--bucket <name>", "only this bucket")
    .option("--all-generations", allGenerationsHelp)
    .option("-v, --verbose", "show the head of each report.txt")
    .option("--lines <n>", "report.txt lines shown with -v", intAtLeast(1), 30)
    .option("--limit <n>", `distinct failures a page (default ${DEFAULT_PAGING.limit})`, intAtLeast(1))
    .option("--page <n>", "which page of distinct failures, from 1 (default 1)", intAtLeast(1))
    .option("--json", "print the same data as one JSON object")
    .option("--master <host:port>", "ask a running coordinator instead of reading the store")
    .addOption(tokenOption("with --master: the shared secret (default: $FUZZFLEET_TOKEN, else <out>/fuzzfleet.token)"))
    .addOption(tokenFileOption("with --master: read the shared secret from this file"))
    .option("--corpus <dir>", "an explore campaign's corpus (its -o): its findings (crashes and hangs) by signature, instead of a sweep's failures")
    .action(
      action<{
        state: FailureFilters["state"];
        bucket?: string;
        allGenerations?: boolean;
        verbose?: boolean;
        lines: number;
        limit?: number;
        page?: number;
        json?: boolean;
        master?: string;
        token?: string;
        tokenFile?: string;
        corpus?: string;
      }>(
        async (o) => {
          if (o.corpus !== undefined) {
            refuseSweepFilters(o, ["master", "bucket", "allGenerations", "limit", "page"]);
            const { exploreFindingsData, renderExploreFindings } = await loadExploreFindings();
            const data = exploreFindingsData(o.corpus);
            process.stdout.write(o.json ? JSON.stringify(data, null, 2) + "\n" : renderExploreFindings(data, { verbose: o.verbose ?? false, lines: o.lines }));
            return EXIT.ok;
          }
          const paths = campaignPaths(o);
          const filters = effectiveFilters({ state: o.state, bucket: o.bucket ?? null, allGenerations: o.allGenerations ?? false });
          if (o.master) {
            if (o.limit !== undefined || o.page !== undefined) {
              throw new UsageError(
                `--${o.page !== undefined ? "page" : "limit"} pages the store's failures, which a coordinator does not (it answers with the first ${DEFAULT_PAGING.limit}); run 'fuzzfleet failures --page N' on the coordinator's host, without --master`,
              );
            }
            const { host, port } = parseHostPort(o.master);
            const token = clientToken({ flag: o.token, file: o.tokenFile, outDir: paths.outDir });
            printRead(
              await remoteRead(host, port, {
                type: "failures",
                token,
                state: filters.state,
                bucket: filters.bucket,
                all_generations: filters.allGenerations,
                verbose: o.verbose ?? false,
                lines: o.lines,
                json: o.json ?? false,
              }),
            );
            return EXIT.ok;
          }
          refuseIfRemoteCampaign(paths.outDir, "failures");
          if (!existsSync(paths.dbPath)) refuseWithoutCampaign(paths, readConfig(paths));
          const text = withReadStore(
            paths.dbPath,
            () => (o.json ? JSON.stringify({ generation: null, filters, failures: [] }, null, 2) + "\n" : `${NOTHING_RECORDED}\n`),
            (store) => {
              const data = failuresData(store, paths.outDir, filters, { limit: o.limit ?? DEFAULT_PAGING.limit, page: o.page ?? 1 });
              return o.json ? JSON.stringify(data, null, 2) + "\n" : renderFailures(data, { verbose: o.verbose ?? false, lines: o.lines });
            },
          );
          process.stdout.write(text);
          return EXIT.ok;
        },
      ),
    );

  program
    .command("export")
    .description("a plain-text bundle of failures (minimized inputs inline) to hand to whoever fixes them")
    .option("--id <n>", "only this failure (ignores the other filters)", intAtLeast(1))
    .addOption(stateOption())
    .option("--bucket <name>", "only this bucket")
    .option("--all-generations", allGenerationsHelp)
    .option("--full", "include every artifact file, not only the minimized input and report.txt")
    .option("--lines <n>", "lines shown per file section", intAtLeast(1), 200)
    .option("-o, --output <file>", "write the bundle to a file instead of stdout")
    .option("--corpus <dir>", "an explore campaign's corpus (its -o): bundle its findings (inputs and output tails) instead of a sweep's failures")
    .action(
      action<{
        id?: number;
        state: FailureFilters["state"];
        bucket?: string;
        allGenerations?: boolean;
        full?: boolean;
        lines: number;
        output?: string;
        corpus?: string;
      }>(async (o) => {
        if (o.corpus !== undefined) {
          refuseSweepFilters(o, ["id", "bucket", "allGenerations", "full"]);
          const { exploreFindingsData, exportExploreFindings } = await loadExploreFindings();
          const bundle = exportExploreFindings(exploreFindingsData(o.corpus), { lines: o.lines });
          if (bundle.findings === 0) {
            process.stderr.write(`no findings recorded on ${o.corpus}\n`);
            return EXIT.ok;
          }
          writeBundle(o.output, bundle.text, `${bundle.findings} finding(s)`, exploreKeptOut(o.corpus));
          return EXIT.ok;
        }
        const paths = campaignPaths(o);
        refuseIfRemoteCampaign(paths.outDir, "export");
        const found = readConfig(paths);
        if (!existsSync(paths.dbPath)) refuseWithoutCampaign(paths, found);
        // The bundle goes to stdout; everything said about it goes to stderr.
        const config = found.config;
        const bundle = withReadStore(
          paths.dbPath,
          () => null,
          (store) =>
            exportBundle(store, {
              id: o.id ?? null,
              state: o.state,
              bucket: o.bucket ?? null,
              allGenerations: o.allGenerations ?? false,
              full: o.full ?? false,
              lines: o.lines,
              outDir: paths.outDir,
              appBuildNow: optionalAppBuild(config),
              check: config?.generator.check ?? null,
              checkDir: config?.dir ?? null,
            }),
        );
        if (!bundle) {
          process.stderr.write(`${NOTHING_RECORDED}\n`);
          return EXIT.ok;
        }
        if (bundle.failures === 0 && o.id !== undefined) {
          throw new UsageError(`--id ${o.id}: no failure has that id in this store; 'fuzzfleet failures --state all --all-generations' lists them`);
        }
        if (bundle.failures === 0) {
          process.stderr.write("no matching failures\n");
          return EXIT.ok;
        }
        writeBundle(o.output, bundle.text, `${bundle.failures} failure(s)`, [...sweepKeptOut(paths.outDir), { dir: paths.dbPath, what: "the store" }]);
        return EXIT.ok;
      }),
    );
}

/** The bundle to stdout, or to the file -o names (saying so on stderr). */
function writeBundle(output: string | undefined, text: string, what: string, keepOut: readonly KeptOut[]): void {
  if (!output) {
    process.stdout.write(text);
    return;
  }
  writeOutputFile(output, text, { flag: "-o", what: "the export", keepOut });
  process.stderr.write(`wrote ${output} (${what}, ${Buffer.byteLength(text)} bytes)\n`);
}

const SWEEP_FLAGS = { master: "--master", bucket: "--bucket", allGenerations: "--all-generations", id: "--id", full: "--full", limit: "--limit", page: "--page" } as const;

/** --corpus reads an explore campaign's findings: the sweep's filters mean nothing there. */
function refuseSweepFilters<T extends object>(opts: T, keys: (keyof typeof SWEEP_FLAGS & keyof T)[]): void {
  const o = opts as Record<string, unknown>;
  for (const k of keys as string[]) {
    if (o[k] !== undefined && o[k] !== false) throw new UsageError(`${SWEEP_FLAGS[k as keyof typeof SWEEP_FLAGS]} filters a sweep's failures; with --corpus (an explore campaign's findings) leave it out`);
  }
  if (o.state !== undefined && o.state !== "open") throw new UsageError(`--state ${String(o.state)} filters a sweep's failures; with --corpus (an explore campaign's findings) leave it out`);
}

/**
 * Runs `read` on the store opened read-only, in one transaction (a consistent snapshot, held only
 * while the report is built), or `missing` when there is no store yet.
 */
function withReadStore<T>(dbPath: string, missing: () => T, read: (store: SweepStore) => T): T {
  if (!existsSync(dbPath)) return missing();
  const store = openSweepStore(dbPath, { readonly: true });
  try {
    return store.transaction(() => read(store));
  } finally {
    store.close();
  }
}
