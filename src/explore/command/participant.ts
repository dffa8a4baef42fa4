// A submaster (--join ROOT:PORT): it borrows the campaign of the root (no lock of its own, no
// export, its hidden state is the root's to remove). It waits for the root's token in the shared
// state directory, joins the root's epoch under the rank the root grants, votes in the two-phase
// quiescence, serves its own workers with --port, and in the end reports its counts to the root
// and waits for the release.
import { RuntimeFailure, UsageError } from "../../errors.ts";
import { awaitToken, type FoundToken } from "../../net/token.ts";
import { DEFAULT_FINALIZE_SECONDS, DEFAULT_JOIN_TIMEOUT_SECONDS } from "../defaults.ts";
import { ParticipantEnding, type Ending } from "../fleet/endings.ts";
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

  async startEnding(m: StartedMaster, links: Links): Promise<Ending> {
    if (this.o.port !== null) links.remote = (await serveWorkers(m, null)).remote;
    const p = new ParticipantEnding(m.master, links.rootLink!, m.rank, m.log);
    const { readRoot } = await import("../fleet/peers.ts");
    void readRoot(
      links.rootLink!,
      m.graceMs,
      (f) => {
        if (f.type === "stats_ack" || f.type === "release") m.rounds.inbox.push({ rank: 0, frame: f });
        else p.onFrame(f);
      },
      (why) => {
        m.rounds.lost = why;
        p.onLost(why);
      },
    );
    return p;
  }

  peers(links: Links): { rank: number; host: string | null; lost: boolean }[] {
    return links.rootLink ? [{ rank: 0, host: this.root.host, lost: links.rootLink.closed }] : [];
  }

  /** Reports its counts to the root and waits for the release; the hidden state stays (the root's). */
  async finish(e: Ended, links: Links): Promise<number> {
    const { master, rank, graceMs, log, write, rounds } = e.started;
    const o = this.o;
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
    return exitCodeOf({ end: e.end, problems: e.problems.length, newFindings: e.newFindings, failOnFindings: o.failOnFindings ?? false, rendezvousTimedOut: r.timedOut });
  }
}
