// A serving master's port: the worker server for its remote workers (and, on the root, the
// submasters that join it), listening, and the banner that tells them how to join. The banner
// names the token file, never the secret, unless --token put the secret on the command line.
import { hostname } from "node:os";
import { RuntimeFailure } from "../../errors.ts";
import type { Connection } from "../../net/connection.ts";
import type { ExploreSetupT, PeerHelloFrame } from "../../net/messages.ts";
import type { FoundToken } from "../../net/token.ts";
import type { ReadService } from "../../net/worker-server.ts";
import type { ExploreMaster } from "../master/master.ts";
import { ExploreWorkerProtocol } from "./worker-protocol.ts";

export interface ListenOptions {
  master: ExploreMaster;
  found: FoundToken;
  nonce: { path: string; value: string };
  /** Everything of `welcome.explore` except the per-worker stage root. */
  setup: Omit<ExploreSetupT, "stage_root">;
  leaseTtlMs: number;
  /** --bind, else this host's name. */
  bind: string | null;
  port: number;
  now: () => number;
  log: (line: string) => void;
  /** A result was consumed or a worker left: the master loop re-evaluates at once. */
  onProgress: () => void;
  /** The root also accepts submasters on its port. */
  onPeer: ((conn: Connection, hello: PeerHelloFrame) => Promise<void>) | null;
}

/** Starts listening and prints how workers join; the port is the one bound (for --port 0). */
export async function listenForWorkers(o: ListenOptions): Promise<{ remote: ExploreWorkerProtocol; port: number }> {
  const refuseRead = { type: "text" as const, text: "an explore master answers no status queries; watch its console\n" };
  const read: ReadService = { status: () => refuseRead, failures: () => refuseRead };
  const remote = new ExploreWorkerProtocol({
    master: o.master,
    token: o.found.token,
    nonce: o.nonce,
    setup: o.setup,
    leaseSeconds: o.leaseTtlMs / 1000,
    heartbeatSeconds: Math.max(0.5, Math.min(5, o.leaseTtlMs / 4000)),
    read,
    now: o.now,
    log: o.log,
    onProgress: o.onProgress,
    onPeer: o.onPeer,
  });
  const bind = o.bind ?? hostname();
  let addr;
  try {
    addr = await remote.listen(bind, o.port);
  } catch (err) {
    throw new RuntimeFailure(`could not listen on ${bind}:${o.port} — ${(err as Error).message}`, { cause: err });
  }
  const shown = /^[\d.]+$|:/.test(bind) ? addr.address : bind;
  o.log(`listening on ${addr.address}:${addr.port}; workers join with:`);
  o.log(`  fuzzfleet worker --master ${shown}:${addr.port}${workerTokenFlag(o.found)} -j 1${o.found.source === "FUZZFLEET_TOKEN" ? ENV_TOKEN_NOTE : ""}`);
  if (addr.address.startsWith("127.") || addr.address === "::1") {
    o.log("!! that is a LOOPBACK address — hosts other than this one cannot reach it; pass --bind <LAN address>");
  }
  return { remote, port: addr.port };
}

/** What a submaster adds to its command line to get the token; it reads the state directory of its own -o by itself. */
export function joinTokenHint(found: FoundToken): string {
  if (found.file !== null) return ` (the token is read from ${found.file})`;
  return found.source === "--token" ? ` --token ${found.token}` : ENV_TOKEN_NOTE;
}

/** What a worker adds to its command line to get this master's token: never the secret, unless --token gave it. */
function workerTokenFlag(found: FoundToken): string {
  if (found.file !== null) return ` --token-file ${found.file}`;
  return found.source === "--token" ? ` --token ${found.token}` : "";
}

const ENV_TOKEN_NOTE = "  (with this master's FUZZFLEET_TOKEN in the environment)";
