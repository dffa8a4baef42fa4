// A serving master's port: the worker server for its remote workers (and, on the root, the
// submasters that join it), listening and the join banner — both the worker service's
// (net/worker-service.ts), shared with `coordinate`. The banner names the token file, never the
// secret, unless --token put the secret on the command line.
import { hostname } from "node:os";
import type { Connection } from "../../net/connection.ts";
import type { PeerHelloFrame } from "../../net/messages.ts";
import type { FoundToken } from "../../net/token.ts";
import type { ReadService } from "../../net/worker-server.ts";
import { ENV_TOKEN_NOTE, joinBanner, listenForWorkers, workerTokenFlag, type AddressFlags, type Nonce } from "../../net/worker-service.ts";
import type { ExploreMaster } from "../master/master.ts";
import type { WorkerSetup } from "./task-frames.ts";
import { ExploreWorkerProtocol } from "./worker-protocol.ts";

export interface ListenOptions {
  master: ExploreMaster;
  found: FoundToken;
  nonce: Nonce;
  /** What every worker runs its tasks with, except its own stage root. */
  setup: Omit<WorkerSetup, "stageRoot">;
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

const ADDRESS_FLAGS: AddressFlags = { port: "--port", bind: "--bind" };

/** Starts listening and prints how workers join; the port is the one bound (for --port 0). */
export async function serveWorkers(o: ListenOptions): Promise<{ remote: ExploreWorkerProtocol; port: number }> {
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
  const at = await listenForWorkers(remote, o.bind ?? hostname(), o.port, ADDRESS_FLAGS);
  const banner = joinBanner(at, { token: o.found, tokenFileIsWorkersDefault: false, workerArgs: " -j 1", answersStatus: false, flags: ADDRESS_FLAGS });
  for (const line of [...banner.listening, ...banner.commands]) o.log(line);
  return { remote, port: at.port };
}

/** What a submaster adds to its command line to get the token; it reads the state directory of its own -o by itself. */
export function joinTokenHint(found: FoundToken): string {
  if (found.file !== null) return ` (the token is read from ${found.file})`;
  return found.source === "--token" ? workerTokenFlag(found, false) : `  (${ENV_TOKEN_NOTE})`;
}
