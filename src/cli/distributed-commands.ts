// Distributed campaigns: `coordinate` (a sweep's master; sweeps nothing itself) and `worker`
// (for a coordinator or an explore master: its help and its lines speak of both).
import { availableParallelism } from "node:os";
import { Option, type Command } from "commander";
import { parseDuration } from "../config/duration.ts";
import { UsageError } from "../errors.ts";
import { campaignPaths } from "../config/paths.ts";
import { parseHostPort } from "../net/address.ts";
import { action, collect, intAtLeast, portNumber, waitSeconds } from "./action.ts";
import { makeConfirm } from "./prompt.ts";
import { withSignalStop } from "./stop-signals.ts";
import { checkTokenFile, tokenFileOption, tokenOption } from "./token-flags.ts";
import { parseUiAddress } from "../ui/address.ts";

export function registerDistributedCommands(program: Command): void {
  program
    .command("coordinate")
    .description("serve a sweep to remote workers for a time budget (this host sweeps nothing itself)")
    .option("--for <duration>", "time budget: 2h, 90m, 1h30m, 45s (a bare number is minutes)", "1h")
    .addOption(new Option("--port <n>", "listen port; 0 picks a free one (default: [distributed] port)").argParser(portNumber))
    .option("--bind <addr>", "listen address (default: [distributed] bind, else this host's name; never 0.0.0.0 by default)")
    .addOption(tokenOption("shared secret (default: $FUZZFLEET_TOKEN, else <out>/fuzzfleet.token, created 0600 if absent)"))
    .addOption(tokenFileOption("read the shared secret from this file (never created: it must exist; the banner tells workers to pass the same --token-file)"))
    .option("--ui <[host:]port>", "serve the live dashboard and /metrics here (a bare port is 127.0.0.1; 0 = a free port); off loopback it needs the campaign token (docs/dashboard.md)")
    .option("--lane <name>", "serve only this lane (repeatable)", collect, [])
    .option("-y, --yes", "answer yes to prompts (new generation, lane restart)")
    .option("--allow-stale-app", "serve even if [app] sources are newer than the app")
    .option("--force-unlock", "take over the campaign lock (only when you know its holder is dead)")
    .option("--status-every <duration>", "without a terminal: one status line this often (e.g. 30s, 5m; 0 = none); the workers and chunks in flight every five minutes", "60s")
    .addHelpText(
      "after",
      `
Workers that mount the campaign directory at the same path write there; a worker that does not
runs its own copy of the generator and sends a chunk's files over the connection (docs/distributed.md).
Workers pull chunks: fuzzfleet worker --master HOST:PORT -j N (the banner prints the exact command).
The token: --token or --token-file FILE, else $FUZZFLEET_TOKEN, else <out>/fuzzfleet.token,
created (mode 0600) the first time and kept for later sessions; workers started in the campaign
directory read it there. --token shows the secret to every local user (\`ps\`); the file or the
variable does not. No generator sees the token: it is removed from every child's environment.
A lane's cursor only moves to the low-water mark of the chunks in flight; a worker that dies or
stops heartbeating has its chunk reissued. At the deadline the coordinator drains (no new chunks,
waits up to [distributed] drain_grace_minutes), then stops each worker with a fresh token and waits
up to stop_grace_seconds for its exact acknowledgement.
Exit: 0 ok, 1 newly distinct (or reopened) failure, 2 bad config or flag, 3 refused, 4 runtime error,
70 lifecycle incomplete (a worker did not acknowledge the stop; named in the summary).`,
    )
    .action(
      action<{ for: string; port?: number; bind?: string; token?: string; tokenFile?: string; lane: string[]; yes?: boolean; allowStaleApp?: boolean; forceUnlock?: boolean; ui?: string; statusEvery: string }>(
        async (o) => {
          checkTokenFile(o.token, o.tokenFile);
          // Loaded here: a worker never needs the store, the config loader or the engine.
          const { coordinate } = await import("../sweep/session/coordinate.ts");
          const { clock } = await import("../config/format.ts");
          const again = () => process.stdout.write(`[${clock()}] already stopping; waiting for workers (bounded by the drain and stop graces)\n`);
          return withSignalStop(
            ({ signal }) =>
              coordinate({
                paths: campaignPaths(o),
                seconds: parseDuration(o.for),
                laneNames: o.lane,
                allowStaleApp: o.allowStaleApp ?? false,
                forceUnlock: o.forceUnlock ?? false,
                confirm: makeConfirm(o.yes ?? false),
                port: o.port ?? null,
                bind: o.bind ?? null,
                token: o.token,
                tokenFile: o.tokenFile,
                signal,
                ui: o.ui === undefined ? null : parseUiAddress(o.ui),
                live: process.stdout.isTTY === true && (process.stdout.columns ?? 0) > 0,
                statusEverySeconds: /^\s*(0+|off)\s*$/i.test(o.statusEvery) ? 0 : parseDuration(o.statusEvery),
              }),
            { again },
          );
        },
      ),
    );

  program
    .command("worker")
    .description("run a campaign's units here: a sweep coordinator's chunks or an explore master's tasks")
    .requiredOption("--master <host:port>", "the coordinator's or explore master's address (its banner prints it)")
    .addOption(
      new Option("-j, --jobs <n>", "sweep: parallel jobs per chunk, passed to the generator as {jobs}; explore: only shown in the master's log, --slots sets the tasks run at once")
        .argParser(intAtLeast(1))
        .default(availableParallelism(), "this host's cores"),
    )
    .option("--slots <n>", "units held at once: chunks (a coordinator allows up to 8) or explore tasks run side by side", intAtLeast(1), 1)
    .addOption(tokenFileOption("read the shared secret from this file (an explore master's banner names it)"))
    .addOption(tokenOption("the shared secret itself"))
    .option("--wait <duration>", "how long to wait for the token file and the master when they are not there yet: seconds (60) or a duration (15s, 2m)", waitSeconds, 60)
    .addHelpText(
      "after",
      `
One worker serves either kind of campaign; the master's welcome says which.
  sweep    a coordinator hands out chunks (ranges of seeds); the worker runs the generator on each
           with -j as {jobs} and writes its output into the shared fuzzfleet-out/, or into a
           scratch directory of its own whose files it sends over the connection
  explore  an explore master hands out tasks (one corpus input each); the worker runs the target
           on it and stages the children in the shared corpus's hidden directory, or runs its own
           copy of the target and sends the input's children over the connection
The token: --token, else --token-file FILE, else $FUZZFLEET_TOKEN, else <out>/fuzzfleet.token,
the file a sweep coordinator keeps in its campaign directory (run the worker there, or pass --out).
An explore master keeps its token in CORPUS_DIR/.fuzzfleet/fuzzfleet.token: pass that path with
--token-file (the master's banner prints the whole command). A worker started before its master
waits for the token file and then for the master, up to --wait in all, and says so once.
The worker reads no config and no store. At the handshake it proves that it sees the shared
directory, or says it does not (then its files travel over the connection and it runs commands
from its own working directory or PATH); either way the master compares the generator and app
(sweep) or the target build (explore) and refuses a copy that differs (exit 3). Then it runs what
it is given, one line per unit. Under mpirun, srun or Kubernetes, \`fuzzfleet launch\` starts workers with no
address or token to type (docs/cluster.md).
Exit: 0 after the master's stop (or Ctrl-C), 2 bad flag or token,
3 refused by the master (the reason names what differs), a token file refused (symlink,
open to others, not yours), or no token file within --wait,
4 could not reach the master or lost it (its children are killed).`,
    )
    .action(
      action<{ master: string; jobs: number; slots: number; token?: string; tokenFile?: string; wait: number }>(async (o) => {
        const { host, port } = parseHostPort(o.master);
        const paths = campaignPaths(o);
        return withSignalStop(async ({ signal }) => {
          const { runWorker } = await import("../worker/client.ts");
          return runWorker({
            host,
            port,
            jobs: o.jobs,
            slots: o.slots,
            token: { flag: o.token, file: o.tokenFile, outDir: paths.outDir },
            waitSeconds: o.wait,
            signal,
            log: (line) => process.stdout.write(line + "\n"),
          });
        });
      }),
    );
}

