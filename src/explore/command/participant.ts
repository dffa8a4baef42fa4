// A submaster (--join ROOT:PORT): it borrows the campaign of the root (no lock of its own, no
// export, its hidden state is the root's to remove). It waits for the root's token in the shared
// state directory, joins the root's epoch under the rank the root grants, votes in the two-phase
// quiescence, serves its own workers with --port, and in the end reports its counts to the root
// and waits for the release.
import { RuntimeFailure, UsageError } from "../../errors.ts";
import { awaitToken, type FoundToken } from "../../net/token.ts";
import { DEFAULT_FINALIZE_SECONDS, DEFAULT_JOIN_TIMEOUT_SECONDS } from "../defaults.ts";
import type { Ending } from "../fleet/endings.ts";
import type { FailoverEnding } from "../fleet/failover.ts";
import { problem } from "../../core/problems.ts";
import type { JoinedRoot } from "../fleet/peers.ts";
import { epochVisible, workDir } from "../state/work-dir.ts";
import { writeStatsJson } from "./stats.ts";
import { report } from "./banner.ts";
import type { ExploreOptions } from "./options.ts";
import { ENDED, exitCodeOf } from "./outcome.ts";
import { serveWorkers, type Ended, type Links, type MasterRole, type PlaceContext, type StartedMaster } from "./role.ts";
import { computeStats } from "./stats.ts";

/**
 * The environment variable by which a launched submaster (fuzzfleet launch) asks the root for its
 * launcher rank; unset, the root gives the next free rank in join order.
 */
export const MASTER_RANK_ENV = "FUZZFLEET_MASTER_RANK";

/** The rank this submaster asks for, from MASTER_RANK_ENV: null when unset, refused when not a rank. */
export function requestedRank(env: NodeJS.ProcessEnv = process.env): number | null {
  const raw = env[MASTER_RANK_ENV];
  if (raw === undefined) return null;
  const n = Number(raw.trim());
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new UsageError(`${MASTER_RANK_ENV} wants a submaster rank, an integer >= 1 (got '${raw}'); unset it to take the next free rank`);
  }
  return n;
}

/** How long a submaster waits for the root's token file and then the root, together. */
export const JOIN_WAIT_SECONDS = 60;

export class ParticipantMaster implements MasterRole {
  readonly kind = "participant" as const;
  readonly ownsCampaign = false;

  /** How this master follows the root, or takes over its role (set once its ending starts). */
  private failover: FailoverEnding | null = null;

  constructor(
    private readonly o: ExploreOptions,
    private readonly root: { host: string; port: number },
  ) {}

  /**
   * The root's token from the shared state directory, waiting for it if the root is not up yet;
   * the root's host name is checked first, which no wait could fix.
   */
  async campaignToken(t: { flag: string | undefined; file?: string; state: string; signal: AbortSignal; write: (line: string) => void }): Promise<FoundToken> {
    const { checkHostName } = await import("../../net/dial-wait.ts");
    await checkHostName(this.root.host, this.root.port);
    const found = await awaitToken(
      { flag: t.flag, file: t.file, outDir: t.state },
      { waitSeconds: JOIN_WAIT_SECONDS, signal: t.signal, log: t.write, creator: "the root master", fix: "start the root master with the same -o, or pass --token or FUZZFLEET_TOKEN" },
    );
    if (!found) throw new RuntimeFailure("interrupted while waiting for the campaign token");
    return found;
  }

  /** It serves with the root's token. */
  servingToken(): null {
    return null;
  }

  /** Joins the root: its rank, the ranks, and the root's epoch, which must be visible here. */
  async place(c: PlaceContext): Promise<JoinedRoot> {
    const rank = requestedRank();
    c.write(`fuzzfleet explore: joining the root master at ${this.root.host}:${this.root.port}${rank !== null ? ` as rank ${rank}` : ""}`);
    const { joinRoot } = await import("../fleet/peers.ts");
    const joined = await joinRoot({
      ...this.root,
      token: c.token!.token,
      setup: c.setup,
      waitSeconds: Math.max(0, JOIN_WAIT_SECONDS - (c.now() - c.joinWaitStart) / 1000),
      joinTimeoutMs: (this.o.joinTimeoutSeconds ?? DEFAULT_JOIN_TIMEOUT_SECONDS) * 1000,
      signal: this.o.signal,
      log: c.write,
      rank,
    });
    if (!epochVisible(c.state, joined.epoch)) {
      joined.conn.destroy();
      throw new RuntimeFailure(`the root's campaign state ${workDir(c.state, joined.epoch)} is not visible here: every master must mount the corpus directory at the same path`);
    }
    c.links.rootLink = joined.conn;
    return joined;
  }

  tag(rank: number): string {
    return `[explore r${rank}]`;
  }

  /**
   * Follows the root; if the root is lost, the root's role moves with its share (fleet/failover.ts):
   * this master leads if it took that share over, and rejoins the master that did otherwise.
   */
  async startEnding(m: StartedMaster, links: Links): Promise<Ending> {
    const { FailoverEnding } = await import("../fleet/failover.ts");
    // A master's hello on this master's port: seated while it leads, refused otherwise.
    const accept = (...hello: Parameters<FailoverEnding["accept"]>) => failover.accept(...hello);
    let served: { host: string; port: number } | null = null;
    // The address the others dial once this master leads: where it reached the root from, unless
    // --bind named one address.
    const local = links.rootLink!.socket.localAddress?.replace(/^::ffff:/, "") ?? "127.0.0.1";
    const failover = new FailoverEnding({
      master: m.master,
      rank: m.rank,
      ranks: m.ranks,
      epoch: m.epoch,
      workDir: m.workDir,
      token: m.found!.token,
      setup: m.setup,
      nonce: m.nonce,
      graceMs: m.graceMs,
      joinTimeoutMs: (this.o.joinTimeoutSeconds ?? DEFAULT_JOIN_TIMEOUT_SECONDS) * 1000,
      leaseTtlMs: m.leaseTtlMs,
      maxIdleMs: this.o.maxIdleSeconds * 1000,
      follow: this.o.follow ?? false,
      signal: this.o.signal,
      now: m.now,
      log: m.log,
      listen: async () => {
        if (served === null) {
          const { remote, port } = await serveWorkers(m, accept, { bind: local, port: 0 });
          links.remote = remote;
          served = { host: local, port };
        }
        return served;
      },
      setLink: (conn) => {
        if (links.rootLink !== conn) links.rootLink?.destroy();
        links.rootLink = conn;
      },
      setHub: (hub) => (links.hub = hub),
      onRoundFrame: (rank, frame) => m.rounds.inbox.push({ rank, frame }),
      onLinkLost: (why) => (m.rounds.lost = why),
    });
    this.failover = failover;
    if (this.o.port !== null) {
      const { remote, port } = await serveWorkers(m, accept);
      links.remote = remote;
      served = { host: this.o.bind !== null && !isWildcard(this.o.bind) ? this.o.bind : local, port };
    }
    failover.follow(links.rootLink!, 0);
    return failover;
  }

  peers(links: Links): { rank: number; host: string | null; lost: boolean }[] {
    const hub = this.failover?.hub;
    if (hub) return hub.peers.map((p) => ({ rank: p.rank, host: p.host, lost: p.conn.closed }));
    const leader = this.failover?.leaderRank ?? 0;
    return links.rootLink ? [{ rank: leader, host: leader === 0 ? this.root.host : links.rootLink.remote, lost: links.rootLink.closed }] : [];
  }

  /**
   * Reports its counts to the leader and waits for the release; the hidden state stays (the
   * root's). A master that took over the root's role ends the campaign as the root would.
   */
  async finish(e: Ended, links: Links, removeState: () => void): Promise<number> {
    const hub = this.failover?.hub;
    if (hub) {
      const { leadFinish } = await import("./root.ts");
      return leadFinish(e, links, hub, e.started.rank, removeState);
    }
    const { master, rank, graceMs, log, write, rounds } = e.started;
    const o = this.o;
    if (links.rootLink === null) {
      e.problems.push(problem("statistics", `no master leads the campaign any more (${rounds.lost ?? "the root was lost"}): this master's counts were reported to nobody`));
      return this.report(e, links, false);
    }
    const { participantStats } = await import("../fleet/stats-round.ts");
    const r = await participantStats({
      executors: { local_slots: o.slots, remote_workers: links.remote?.server.everyone.length ?? 0 },
      conn: links.rootLink!,
      rank,
      master,
      late: e.late,
      graceMs,
      finalizeMs: (o.finalizeSeconds ?? DEFAULT_FINALIZE_SECONDS) * 1000,
      inbox: rounds.inbox,
      lost: () => rounds.lost,
      log,
    });
    e.problems.push(...r.problems);
    return this.report(e, links, r.timedOut);
  }

  /** What a submaster says of its own share at the end, its --stats-json, and its exit code. */
  private report(e: Ended, links: Links, timedOut: boolean): number {
    const { master, rank, write } = e.started;
    const o = this.o;
    const stale = master.counters.staleResults;
    write(
      `rank ${rank}: ${master.counters.observations} observation(s), ${master.counters.generated} generated` +
        `${stale ? `, ${stale} stale result(s) discarded (their tasks were taken over)` : ""}` +
        `${e.late ? `, ${e.late} late input file(s) left for the next campaign` : ""}`,
    );
    if (o.statsJson) {
      // A submaster's own view: its share of the work, its executors (the root's file has the fleet's).
      const c = master.counters;
      const stats = computeStats({
        leases: e.leases,
        master,
        corpusDir: e.corpusDir,
        elapsedSeconds: e.elapsed,
        executors: { local: o.slots, remote: links.remote?.server.everyone.length ?? 0 },
        masters: e.masters,
        exchanged: { observations: c.observations, generated: c.generated, late: e.late, byMaster: { [rank]: c.observations } },
      });
      writeStatsJson(o.statsJson, e.corpusDir, stats, { ended: ENDED[e.end], role: "submaster", rank, new_findings: e.newFindings, afl_exported: null });
    }
    if (e.problems.length > 0) report(write, e.problems, e.workDir, e.started.epoch);
    return exitCodeOf({ end: e.end, problems: e.problems.length, newFindings: e.newFindings, failOnFindings: o.failOnFindings ?? false, rendezvousTimedOut: timedOut });
  }
}

/** An address that binds every interface: not one the others could dial. */
function isWildcard(bind: string): boolean {
  return bind === "0.0.0.0" || bind === "::" || bind === "[::]";
}
