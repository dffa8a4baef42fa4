// `explore`: run a target over a content-addressed corpus until the frontier is exhausted.
import { Option, type Command } from "commander";
import { UsageError } from "../errors.ts";
import { DEFAULT_BUDGETS, DEFAULT_FINALIZE_SECONDS, DEFAULT_JOIN_TIMEOUT_SECONDS } from "../explore/defaults.ts";
import { action, intAtLeast, portNumber } from "./action.ts";
import { parseHostPort } from "../net/address.ts";
import { DEFAULT_STOP_GRACE_SECONDS } from "../net/worker-service.ts";
import { signalLabel, withSignalStop } from "./stop-signals.ts";
import { checkTokenFile, tokenFileOption, tokenOption } from "./token-flags.ts";
import { parseCorpusMode } from "../explore/corpus-mode.ts";
import { parseDuration, parseSeconds } from "../config/duration.ts";
import { parseUiAddress } from "../ui/address.ts";
import type { DashboardSnapshot } from "../ui/source.ts";

/** A flag in seconds: a bare number of seconds or a duration (90, 1.5, 45s, 2m, 1h30m), at least `min`. */
function seconds(flag: string, min: number) {
  return (value: string): number => {
    const n = parseSeconds(value);
    if (n === null || n < min) throw new UsageError(`${flag} wants seconds >= ${min} or a duration such as 45s, 2m or 1h30m (got '${value}')`);
    return n;
  };
}

function corpusMode(value: string): number {
  const mode = parseCorpusMode(value);
  if (typeof mode !== "number") throw new UsageError(`--corpus-mode: ${mode.error}`);
  return mode;
}

export function registerExplore(program: Command): void {
  program
    .command("explore")
    .description("explore a corpus: run TARGET on every unique input, publish its children, until nothing new is left")
    .usage("-i INPUT_DIR -o CORPUS_DIR [options] -- TARGET [ARGS...]")
    .argument("[target...]", "the target command; put it after --. An argument containing @@ gets the input's path, else the input is on stdin")
    .requiredOption(
      "-i, --input-dir <dir>",
      "seed inputs; rescanned about every second, so a producer may keep adding files. Repeat for several directories (e.g. each AFL++ instance's queue/)",
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .requiredOption("-o, --output-dir <dir>", "the shared content-addressed corpus (files named by their SHA-256)")
    .option("-j, --jobs <n>", "local slots: executions run in this process", intAtLeast(0), 1)
    .option("-t, --timeout <sec>", "per-execution time limit", seconds("-t", 0.001), 90)
    .option("--max-idle <sec>", "end this long (monotonic, exact) after the last work, once nothing is pending or running", seconds("--max-idle", 0), 60)
    .option("--wall-timeout <sec>", "whole-campaign budget; 0 = none. No run is started that could not finish inside it", seconds("--wall-timeout", 0), 0)
    .option("--simulate", "when a run produced no child, synthesise 5 seeded byte mutants (for targets not built with SymCC)")
    .addOption(new Option("--port <n>", "also serve remote workers on this port (0 = a free one)").argParser(portNumber))
    .option("--bind <addr>", "listen address with --port (default: this host's name)")
    .addOption(tokenOption("shared secret for workers and masters (default: $FUZZFLEET_TOKEN, else CORPUS_DIR/.fuzzfleet/fuzzfleet.token)"))
    .addOption(tokenFileOption("read the shared secret from this file (never created, and kept after the end; workers and --join masters pass the same --token-file)"))
    .option("--stats-json <file>", "also write the final statistics as one JSON object")
    .option("--ui <[host:]port>", "serve the live dashboard and /metrics here (a bare port is 127.0.0.1; 0 = a free port; off loopback the campaign token guards it)")
    .option("--status-every <duration>", "without a terminal: one status line this often (e.g. 30s, 5m; 0 = none)", "60s")
    .option("--resume <epoch>", "continue the crashed or interrupted campaign with this epoch (redo commits, take over leases, rescan)")
    .option("--lease-ttl <sec>", "a task whose holder stopped renewing it for this long may be taken over (default max(120, 4 x -t))", seconds("--lease-ttl", 0.1))
    .option("--masters <n>", "several masters: this is the root (rank 0) of N; needs --port, the others use --join", intAtLeast(1), 1)
    .option("--join <host:port>", "be a submaster of the root master at this address (same command line otherwise)")
    .addOption(new Option("--ownership <mode>", "rendezvous: each content has one owning master; broadcast: every master runs everything (for comparison)").choices(["rendezvous", "broadcast"]).default("rendezvous"))
    .option("--grace <sec>", "a master silent for this long is lost; also bounds the statistics exchange (default max(120, 4 x -t))", seconds("--grace", 0.1))
    .option("--follow", "keep following the inputs (a live AFL++ queue): an idle frontier does not end the campaign; it ends by --wall-timeout or a signal")
    .option("--corpus-mode <octal>", "mode of corpus files: 0600 (default), 0640 or 0644 (e.g. for an AFL++ running as another user)", corpusMode)
    .option("--afl-sync <dir>", "export every new input into the AFL++ sync directory DIR (AFL's -o) as DIR/fuzzfleet/queue/id:NNNNNN,…, which afl-fuzz -M imports")
    .option("--fail-on-findings", "exit 1 when this campaign recorded a crash or hang on an input never recorded before")
    .option(
      "--target-file <path>",
      "a file that is part of the target (a SymCC runtime, a config, the script an interpreter runs): hashed into the target's build with its executable. Repeat for several",
      (value: string, previous: string[] | undefined) => [...(previous ?? []), value],
    )
    .option("--fresh", "run content that earlier campaigns on this corpus already explored again (by default it is skipped and counted)")
    .option("--stop-grace <sec>", "at the end, how long remote workers have to acknowledge the stop (as a sweep's stop_grace_seconds)", seconds("--stop-grace", 0.1), DEFAULT_STOP_GRACE_SECONDS)
    .option("--join-timeout <sec>", "how long the root waits for every master to join, a submaster for the roster, and, once the root is lost, the masters for the one that took over its role", seconds("--join-timeout", 0.1), DEFAULT_JOIN_TIMEOUT_SECONDS)
    .option("--finalize-timeout <sec>", "how long a submaster waits, after its statistics were acknowledged, for the root's final release (then exit 71)", seconds("--finalize-timeout", 0.1), DEFAULT_FINALIZE_SECONDS)
    .addOption(
      new Option("--sync <policy>", "fence: fsync the lease records whose loss a crash could not redo (commit fences); all: fsync every record write")
        .choices(["fence", "all"])
        .default("fence"),
    )
    .option("--max-children <n>", "children one execution may produce", intAtLeast(1), DEFAULT_BUDGETS.maxChildren)
    .option("--max-result-bytes <n>", "bytes of children one execution may produce", intAtLeast(1), DEFAULT_BUDGETS.maxResultBytes)
    .option("--max-input-bytes <n>", "bytes of one corpus input", intAtLeast(1), DEFAULT_BUDGETS.maxInputBytes)
    .addHelpText(
      "after",
      `
Target contract (SymCC's): SYMCC_OUTPUT_DIR is a fresh directory; every regular file the target
writes there (except *.hints) is a child input. With @@ in the argv the input is a file and
SYMCC_INPUT_FILE names it; otherwise it arrives on stdin.
Every unique content is executed once; children become public in the corpus only after their
parent's result was verified and committed. Hidden state lives in CORPUS_DIR/.fuzzfleet/ and is
removed after a clean end.
Build: the target's executable (found as it is run), every --target-file and the argv are hashed
into a build id. Content earlier campaigns explored under the same build is skipped (--fresh
runs it again); under another build it runs again, and so does a finding's input.
The token (with --port, --masters or --join): --token or --token-file FILE, else
$FUZZFLEET_TOKEN, else the file CORPUS_DIR/.fuzzfleet/fuzzfleet.token, which a serving master
creates (mode 0600) when absent and removes after a clean end. --token shows the secret to every
local user (\`ps\`); the file or the variable does not. No target sees the token (it is removed
from every child's environment), and a finding's output tail that holds it keeps [redacted]. The banner names that file instead of printing the secret: workers
take it with --token-file, and a --join master with the same -o reads it by itself (waiting for
it if the root is not up yet). A lone master without --port uses no token.
At the end every remote worker is stopped with a fresh token and has --stop-grace seconds to
finish its runs, clean up and acknowledge exactly; one that does not is named (exit 70).
Several masters: start the root with --masters N --port P, then each other master with the same
command line and --join ROOT_HOST:P (the root prints it). Each content hash has one
owning master (rendezvous hashing); leases make any takeover safe; the campaign ends only when
every master agrees, through a two-phase commit, that nothing is left.
Exit: 0 frontier exhausted, 1 new crashes or hangs (with --fail-on-findings), 2 bad flag, 3 refused
(lock held, setup differs), 4 runtime error, 5 wall budget reached, 6 interrupted, 70 lifecycle
incomplete (invalid results, digest mismatch, unacknowledged stop, lost master, quiescence
conflict), 71 final rendezvous timed out. Precedence: 71, 70, 1, then 5 or 6 (docs/exit-codes.md).`,
    )
    .action(
      action<{
        inputDir: string[];
        outputDir: string;
        jobs: number;
        timeout: number;
        maxIdle: number;
        wallTimeout: number;
        simulate?: boolean;
        port?: number;
        bind?: string;
        token?: string;
        tokenFile?: string;
        statsJson?: string;
        resume?: string;
        leaseTtl?: number;
        maxChildren: number;
        maxResultBytes: number;
        maxInputBytes: number;
        masters: number;
        join?: string;
        ownership: "rendezvous" | "broadcast";
        grace?: number;
        stopGrace: number;
        fresh?: boolean;
        targetFile?: string[];
        joinTimeout: number;
        finalizeTimeout: number;
        sync: "fence" | "all";
        follow?: boolean;
        corpusMode?: number;
        aflSync?: string;
        failOnFindings?: boolean;
        ui?: string;
        statusEvery: string;
      }>(async (o, cmd) => {
        const target = cmd.args;
        if (target.length === 0) throw new UsageError("no target command: put it after --, e.g. fuzzfleet explore -i seeds -o corpus -- ./target @@");
        if (o.jobs === 0 && o.port === undefined) throw new UsageError("-j 0 needs --port: with no local slot and no remote worker nothing would run");
        if (o.join && o.masters > 1) throw new UsageError("--join and --masters exclude each other: --masters is for the root, --join for the others");
        if (o.masters > 1 && o.port === undefined) throw new UsageError("--masters needs --port: the other masters join the root on that port");
        if (o.join && o.resume) throw new UsageError("--resume belongs on the root: submasters join whatever epoch the root runs");
        const join = o.join ? parseHostPort(o.join, "--join") : null;
        if (o.maxResultBytes > o.maxInputBytes) throw new UsageError("--max-result-bytes must not exceed --max-input-bytes: every child becomes an input");
        const ui = o.ui !== undefined ? parseUiAddress(o.ui) : null;
        checkTokenFile(o.token, o.tokenFile);
        const statusEverySeconds = /^\s*(0+|off)\s*$/i.test(o.statusEvery) ? 0 : parseDuration(o.statusEvery);
        const { explore } = await import("../explore/command/run.ts");
        const { ExploreConsole } = await import("../explore/views/console.ts");
        // log-update is only loaded when there is a terminal to redraw on.
        const redraw = process.stdout.isTTY === true && (process.stdout.columns ?? 0) > 0 ? (await import("log-update")).default : null;
        const view = (snapshot: () => DashboardSnapshot) =>
          new ExploreConsole({ snapshot, live: redraw, statusEverySeconds, columns: () => process.stdout.columns || 100 });
        const words = {
          stopping: (sig: NodeJS.Signals) =>
            process.stdout.write(
              `${signalLabel(sig)}: stopping — local executions are stopped and requeued, remote workers finish theirs and acknowledge; the state is kept for --resume\n`,
            ),
          again: (sig: NodeJS.Signals) => process.stdout.write(`${sig}: already stopping (every wait is bounded)\n`),
        };
        return withSignalStop(
          ({ signal }) =>
            explore({
              inputDir: o.inputDir,
              corpusDir: o.outputDir,
              target,
              slots: o.jobs,
              timeoutSeconds: o.timeout,
              maxIdleSeconds: o.maxIdle,
              wallTimeoutSeconds: o.wallTimeout,
              simulate: o.simulate ?? false,
              port: o.port ?? null,
              bind: o.bind ?? null,
              token: o.token,
              tokenFile: o.tokenFile,
              statsJson: o.statsJson ?? null,
              resumeEpoch: o.resume ?? null,
              leaseTtlSeconds: o.leaseTtl ?? null,
              budgets: { maxChildren: o.maxChildren, maxResultBytes: o.maxResultBytes, maxInputBytes: o.maxInputBytes },
              ownership: o.ownership,
              masters: o.masters,
              join,
              graceSeconds: o.grace ?? null,
              stopGraceSeconds: o.stopGrace,
              fresh: o.fresh === true,
              targetFiles: o.targetFile ?? [],
              joinTimeoutSeconds: o.joinTimeout,
              finalizeSeconds: o.finalizeTimeout,
              durability: o.sync,
              follow: o.follow === true,
              corpusMode: o.corpusMode ?? null,
              aflSync: o.aflSync ?? null,
              failOnFindings: o.failOnFindings === true,
              ui,
              view,
              signal,
            }),
          words,
        );
      }),
    );
}
