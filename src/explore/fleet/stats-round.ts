// The end of a campaign with several masters: the bounded statistics exchange (every submaster
// reports once with a random token, the root ACKs each exactly once all have reported) and the
// final rendezvous (the root's `release` once the shared state is settled). Every wait is bounded;
// a silent master is named, and the campaign exits 70 (71 when the final rendezvous times out).
// Each wait is woken by what the masters' links bring (a frame, a loss) or ends at its deadline.
//
// Each master's executors (local slots, remote workers) are counters of its report, so the root's
// `executors` line counts every slot and worker of every master that reported.
import { StatsCollector, StatsSender, type ExecutorCounts, type MasterStats } from "../../core/stats-exchange.ts";
import type { Connection } from "../../net/connection.ts";
import type { FromPeerT, FromRootT } from "../../net/messages.ts";
import type { ExploreMaster } from "../master/master.ts";
import { nextFromRoot, type RootHub } from "./peers.ts";
import { randomToken } from "./tokens.ts";
import { problem, type Problem } from "../../core/problems.ts";

/** Frames of the final rounds, as the wire schemas checked them, by the rank they came from. */
export type Inbox = { rank: number; frame: FromPeerT | FromRootT }[];

export function ownStats(master: ExploreMaster, late: number, executors: ExecutorCounts): MasterStats {
  const c = master.counters;
  return { ...servedCounts(master), interesting: c.claimedChildren, external: master.external.size, late, ...executors };
}

/**
 * A master reports the done records of the table it serves, never its session counters: those
 * miss the commits of an earlier session and the ones redone at --resume (replayCommitting), which
 * the table holds. With partitioned shares, the records of the shares it serves (its own and those
 * it took over): shares are disjoint, so the sum over the masters counts each commit once, a lost
 * master's included. The shares are renewed first: a master that stalled past its lease and has
 * not noticed yet that another took its share over must not count that share too. Under broadcast
 * ownership the table is this master's alone (`leases-r<rank>`): its records are its commits.
 */
function servedCounts(master: ExploreMaster): { observations: number; generated: number } {
  if (master.leaseTable.partition !== null) master.heartbeat();
  let observations = 0;
  let generated = 0;
  for (const r of master.leaseTable.snapshot()) {
    if (r.status !== "done" || !r.commit || r.commit.worker === "budget") continue;
    observations++;
    generated += r.commit.num_generated;
  }
  return { observations, generated };
}

export async function rootStats(o: {
  hub: RootHub;
  /** The leader's rank: the root's, or that of the master that took over its role. */
  rank?: number;
  master: ExploreMaster;
  late: number;
  graceMs: number;
  inbox: Inbox;
  now: () => number;
  log: (line: string) => void;
  /** The root's own executors. */
  executors: ExecutorCounts;
}): Promise<{ problems: Problem[]; totals: MasterStats; byMaster: Record<number, number>; executors: ExecutorCounts }> {
  // A lost master whose share another master took over reports through that master (servedCounts):
  // nobody waits for it. One lost while it still holds its share is missed, and named below.
  const takenOver = takenOverRanks(o.master);
  const peers = o.hub.peers.filter((p) => !(p.lost && takenOver.has(p.rank))).map((p) => p.rank);
  const collector = new StatsCollector({ rank: o.rank ?? 0, own: ownStats(o.master, o.late, o.executors), peers });
  const deadline = o.now() + o.graceMs;
  for (;;) {
    for (const item of o.inbox.splice(0)) {
      if (item.frame.type !== "stats") continue;
      const r = collector.onStats(item.rank, item.frame);
      if (r.class !== "accepted") o.log(`statistics from master ${item.rank} refused (${r.class})`);
      for (const ack of r.acks) {
        const peer = o.hub.peers.find((p) => p.rank === ack.rank);
        if (peer) o.hub.send(peer, { type: "stats_ack", rank: ack.rank, token: ack.token });
      }
    }
    const out = collector.outcome(o.now(), deadline);
    // A master that is gone will not report: no need to wait for it.
    const waitingOnLive = out.pending.some((r) => !o.hub.peers.find((p) => p.rank === r)?.lost);
    if (out.settled || !waitingOnLive) {
      // After a failover: a master expected back that never rejoined, whose share nobody took over, reported nothing.
      const missing = o.hub.absent.filter((r) => !takenOver.has(r));
      const problems = out.pending.map((r) => {
        const peer = o.hub.peers.find((p) => p.rank === r);
        return problem("statistics", `master rank ${r}${peer ? ` (${peer.host})` : ""} sent no statistics${peer?.lost ? ` (lost: ${peer.lost})` : ` within ${Math.round(o.graceMs / 1000)}s`}`);
      });
      for (const r of missing) problems.push(problem("statistics", `master rank ${r} never rejoined after the root was lost, and nobody took its share over: its counts are missing`));
      const executors = { local_slots: out.totals.local_slots, remote_workers: out.totals.remote_workers };
      return { problems, totals: out.totals, byMaster: out.byMaster, executors };
    }
    await o.hub.nextEvent(Math.max(1, deadline - o.now()));
  }
}

/** The ranks whose share is served by another master's holder (partitioned; none otherwise). */
function takenOverRanks(master: ExploreMaster): Set<number> {
  if (master.leaseTable.partition === null) return new Set();
  const p = master.leaseTable.partition!;
  return new Set(p.partitions().filter((s) => s.holderRank !== null && s.holderRank !== s.rank).map((s) => s.rank));
}

export async function participantStats(o: {
  conn: Connection;
  rank: number;
  master: ExploreMaster;
  late: number;
  graceMs: number;
  finalizeMs: number;
  inbox: Inbox;
  lost: () => string | null;
  log: (line: string) => void;
  /** This master's executors. */
  executors: ExecutorCounts;
}): Promise<{ problems: Problem[]; timedOut: boolean }> {
  const sender = new StatsSender(o.rank, randomToken());
  try {
    o.conn.send({ type: "stats", ...sender.message(ownStats(o.master, o.late, o.executors)) });
  } catch (err) {
    return { problems: [problem("statistics", `could not send statistics to the root: ${(err as Error).message}`)], timedOut: false };
  }
  const ackDeadline = performance.now() + o.graceMs;
  let released = false;
  while (!sender.done) {
    for (const item of o.inbox.splice(0)) {
      if (item.frame.type === "stats_ack") sender.onAck(item.frame);
      if (item.frame.type === "release") released = true;
    }
    if (sender.done) break;
    if (o.lost()) return { problems: [problem("statistics", `the root master was lost before acknowledging the statistics: ${o.lost()}`)], timedOut: false };
    if (performance.now() >= ackDeadline) return { problems: [problem("statistics", `the root did not acknowledge the statistics within ${Math.round(o.graceMs / 1000)}s`)], timedOut: false };
    await nextFromRoot(o.conn, Math.max(1, ackDeadline - performance.now()));
  }
  const releaseDeadline = performance.now() + o.finalizeMs;
  while (!released) {
    for (const item of o.inbox.splice(0)) if (item.frame.type === "release") released = true;
    if (released) break;
    if (performance.now() >= releaseDeadline || o.lost()) {
      o.log(`the final rendezvous with the root timed out after ${Math.round(o.finalizeMs / 1000)}s`);
      return { problems: [], timedOut: true };
    }
    await nextFromRoot(o.conn, Math.max(1, releaseDeadline - performance.now()));
  }
  return { problems: [], timedOut: false };
}
