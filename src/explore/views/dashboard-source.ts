// The dashboard of an explore campaign: a DashboardSource over a running master (`explore --ui`),
// or over the files a campaign leaves beside its corpus (`fuzzfleet ui --corpus DIR`, while
// nothing runs; that view and a finding's detail are built in files-view.ts). What it shows: the
// frontier (pending, running, and the lease records leased, committing, expired, done),
// executions/s, unique, generated and redundancy over time, findings by signature, the masters
// and their quiescence phase, the workers, the idle window counting down.
//
// Cheap by design, since it runs on the master's own event loop: the counters and the tasks held
// are memory; what needs the disk (the lease records of the whole fleet) is read at most every
// few seconds, and less often when a read takes long (never more than about 2% of the time). The
// corpus's size is the master's own count (never a listing of a million objects). The findings
// this master records are kept as it records them; the other masters' (one small file per input)
// are picked up a bounded slice per snapshot, reading only the records that changed.
import { lstatSync } from "node:fs";
import { hostname } from "node:os";
import { performance } from "node:perf_hooks";
import { printable } from "../../core/log-lines.ts";
import { findingsView } from "./finding-groups.ts";
import { exploreDiscovery } from "./discovery.ts";
import { exploreMetrics } from "./metrics.ts";
import type { MetricFamily } from "../../ui/metrics.ts";
import type { DashboardSnapshot, DashboardSource, ExploreFrontier, ExploreSeries, FailureDetail, MasterView, WorkerRow } from "../../ui/source.ts";
import type { Ending } from "../fleet/endings.ts";
import type { ExploreMaster } from "../master/master.ts";
import { FindingsReader, type FindingRecord } from "../state/findings.ts";
import type { LeaseTable } from "../state/lease-table.ts";
import { type CampaignFiles, CampaignFilesView, DISK_EVERY_MS, DISK_SHARE, findingDetail } from "./files-view.ts";

/** Points kept in memory for the plots; older ones are thinned out (every other one dropped). */
const MAX_POINTS = 600;
/** The window of the rates shown as "now" (ms). */
const RATE_WINDOW_MS = 5000;
const FINDINGS_EVERY_MS = 10_000;
/** Finding records looked over (stat'ed, and read when changed) in one snapshot at most: a few ms of the master's loop. */
export const FINDINGS_PER_SNAPSHOT = 250;

/** A remote worker as the explore worker server knows it (the fields read here). */
export interface RemoteWorkerView {
  readonly label: string;
  readonly key: string;
  readonly jobs: number;
  readonly tasks: number;
  readonly gone: string | null;
  readonly conn: { readonly closed: boolean; readonly socket: { readonly bytesRead: number } };
  /** How its files reach the campaign: the shared directory, or over the connection. */
  readonly files: "shared" | "transfer";
}

/** What a running master gives the dashboard; everything is read, nothing is changed. */
export interface ExploreLive {
  master: ExploreMaster;
  leases: LeaseTable;
  corpusDir: string;
  target: readonly string[];
  epoch: string;
  rank: number;
  ranks: readonly number[];
  role: "single" | "root" | "participant";
  /** The ending the loop asks (an IdleWindow gives the countdown). */
  ending: () => Ending | null;
  /** Its quiescence phase, when the ending can say more than the master's own state. */
  phase?: () => string | null;
  slots: number;
  /** Remote workers attached now, and every one ever attached. */
  remote: () => { workers: Iterable<RemoteWorkerView>; everyone: readonly RemoteWorkerView[] } | null;
  /** The other masters (the root's submasters, or a submaster's root). */
  peers?: () => { rank: number; host: string | null; lost: boolean }[];
  maxIdleSeconds: number;
  wallTimeoutSeconds: number;
  leaseTtlMs: number;
  /** How often remote workers were told to heartbeat (seconds). */
  heartbeatSeconds: number;
  /** The monotonic clock (ms) and when the campaign started on it. */
  now: () => number;
  startMs: number;
}

interface Sample {
  t: number;
  executions: number;
  generated: number;
  unique: number;
}

export class ExploreDashboardSource implements DashboardSource {
  private readonly samples: Sample[] = [];
  private disk: { at: number; tookMs: number; counts: { leased: number; committing: number; expired: number; done: number } } | null = null;
  private diskProblem: string | null = null;
  /** When each active task was first seen held by its executor (task id -> monotonic ms). */
  private readonly taskSeen = new Map<number, number>();
  /** Per remote worker: the bytes read from it last time, and when that number last moved. */
  private readonly heard = new Map<string, { bytes: number; atMs: number }>();
  private findingsCache: FindingRecord[] = [];
  /** The findings view of findingsCache, computed again only when the records changed. */
  private findingsShown: { of: FindingRecord[]; view: ReturnType<typeof findingsView> } | null = null;
  private findingsReader: FindingsReader | null = null;
  private filesView: CampaignFilesView | null = null;
  /** The findings directory's mtime when they were read, and when (monotonic ms). */
  private findingsRead = { mtimeMs: -1, atMs: -Infinity, tookMs: 0 };

  constructor(
    private readonly o: { title: string; live: ExploreLive | null; files: CampaignFiles | null; wallNow?: () => number },
  ) {
    if (!o.live && !o.files) throw new Error("an explore dashboard source needs a running master or the campaign's files");
  }

  private wallNow(): number {
    return (this.o.wallNow ?? Date.now)();
  }

  /** Records one point of the plots (the dashboard calls it once a second). */
  sample(): void {
    const live = this.o.live;
    if (!live) return;
    const c = live.master.counters;
    const point = { t: this.wallNow() / 1000, executions: c.observations, generated: c.generated, unique: c.claimedChildren };
    const last = this.samples.at(-1);
    if (last && point.t - last.t < 0.5) this.samples[this.samples.length - 1] = point;
    else this.samples.push(point);
    if (this.samples.length > MAX_POINTS) {
      // Cumulative values: dropping every other point keeps every rate right over the wider step.
      const kept = this.samples.filter((_, i) => i % 2 === 0 || i === this.samples.length - 1);
      this.samples.splice(0, this.samples.length, ...kept);
    }
  }

  snapshot(): DashboardSnapshot {
    if (this.o.live) return this.liveSnapshot(this.o.live);
    this.filesView ??= new CampaignFilesView(this.o.files!);
    return this.filesView.snapshot(this.o.title, () => this.wallNow());
  }

  metrics(): MetricFamily[] {
    return exploreMetrics(this.snapshot());
  }

  failureDetail(id: number): FailureDetail | null {
    // Live: the records the dashboard has read so far (reading them all here would hold the master's loop).
    const records = this.o.live ? this.findingsCache : this.o.files!.findings();
    const corpusDir = this.o.live?.corpusDir ?? this.o.files!.corpusDir;
    return findingDetail(records, id, corpusDir, this.o.live?.target ?? null);
  }

  private liveSnapshot(live: ExploreLive): DashboardSnapshot {
    const now = live.now();
    const m = live.master;
    this.sample();
    this.readDisk(live, now);
    const c = m.counters;
    this.readFindings(m, now);
    const ending = live.ending();
    const untilEnd = ending && "untilEnd" in ending && typeof (ending as { untilEnd: unknown }).untilEnd === "function" ? (ending as unknown as { untilEnd(n: number): number }).untilEnd(now) : Infinity;
    const elapsed = (now - live.startMs) / 1000;
    const frontier: ExploreFrontier = {
      pending: m.pendingCount,
      inputBacklog: m.inputBacklogCount,
      running: m.activeCount,
      leased: this.disk?.counts.leased ?? 0,
      committing: this.disk?.counts.committing ?? 0,
      expired: this.disk?.counts.expired ?? 0,
      done: this.disk?.counts.done ?? 0,
      leaseCountsAgeSeconds: this.disk ? Math.max(0, (now - this.disk.at) / 1000) : null,
    };
    const generated = c.generated;
    const unique = c.claimedChildren;
    const roleText = live.role === "single" ? "lone master" : live.role === "root" ? `root of ${live.ranks.length} masters` : `submaster rank ${live.rank} of ${live.ranks.length}`;
    return {
      kind: "explore",
      title: this.o.title,
      takenMs: this.wallNow(),
      live: true,
      status: {
        headline: `explore epoch ${live.epoch.slice(0, 12)}… running on ${hostname()} (${roleText})${this.diskProblem ? ` — ${this.diskProblem}` : ""}`,
        elapsedSeconds: elapsed,
        budgetSeconds: live.wallTimeoutSeconds > 0 ? live.wallTimeoutSeconds : null,
        draining: null,
      },
      sweep: null,
      workers: this.workers(live, now),
      explore: {
        epoch: live.epoch,
        role: roleText,
        frontier,
        totals: {
          executions: c.observations,
          generated,
          unique,
          redundant: Math.max(0, generated - unique),
          corpus: m.corpusSeen.size,
          externalInputs: m.external.size,
          skippedExplored: m.explored.skippedCount,
          problems: m.problems.length,
        },
        rates: this.rates(),
        series: this.series(),
        ...this.shownFindings(),
        // Every execution of the epoch: the done records (every master's, every session's) when they are newer than this session's count.
        discovery: exploreDiscovery(this.findingsCache, live.epoch, Math.max(c.observations, this.disk?.counts.done ?? 0)),
        masters: this.masters(live, untilEnd),
        idle: live.role === "single" ? { windowSeconds: live.maxIdleSeconds, remainingSeconds: Number.isFinite(untilEnd) ? Math.max(0, untilEnd / 1000) : null } : null,
        wall: live.wallTimeoutSeconds > 0 ? { budgetSeconds: live.wallTimeoutSeconds, remainingSeconds: Math.max(0, live.wallTimeoutSeconds - elapsed) } : null,
      },
    };
  }

  private shownFindings(): ReturnType<typeof findingsView> {
    if (this.findingsShown?.of !== this.findingsCache) this.findingsShown = { of: this.findingsCache, view: findingsView(this.findingsCache) };
    return this.findingsShown.view;
  }

  /**
   * The findings: those this master records are known as it records them; the others (every
   * master of the fleet records into the same directory) are picked up by passes over the
   * directory, FINDINGS_PER_SNAPSHOT records per snapshot at most, so ten thousand of them never
   * hold the master's loop in one go. A pass starts when the directory changed, and at least
   * every FINDINGS_EVERY_MS (an mtime can miss a change made within the same tick); a step is
   * taken at most once every DISK_SHARE times as long as the last one took.
   */
  private readFindings(m: ExploreMaster, now: number): void {
    if (!this.findingsReader) {
      const reader = new FindingsReader(m.findings.dir);
      m.findings.onRecorded((r) => reader.note(r));
      this.findingsReader = reader;
    }
    const reader = this.findingsReader;
    const since = now - this.findingsRead.atMs;
    if (since < this.findingsRead.tookMs * DISK_SHARE) {
      this.findingsCache = reader.records();
      return;
    }
    let mtimeMs = this.findingsRead.mtimeMs;
    if (!reader.passing) {
      try {
        mtimeMs = lstatSync(m.findings.dir).mtimeMs;
      } catch {
        mtimeMs = 0; // No finding yet: the directory is made with the first.
      }
    }
    if (reader.passing || mtimeMs !== this.findingsRead.mtimeMs || since >= FINDINGS_EVERY_MS) {
      const start = performance.now();
      reader.step(FINDINGS_PER_SNAPSHOT);
      this.findingsRead = { mtimeMs, atMs: now, tookMs: performance.now() - start };
    }
    this.findingsCache = reader.records();
  }

  /** The lease table's counts, read at most every DISK_EVERY_MS and within DISK_SHARE. */
  private readDisk(live: ExploreLive, now: number): void {
    if (this.disk && now - this.disk.at < Math.max(DISK_EVERY_MS, this.disk.tookMs * DISK_SHARE)) return;
    const start = live.now();
    try {
      const counts = live.leases.counts(this.wallNow(), live.leaseTtlMs);
      this.disk = { at: now, tookMs: live.now() - start, counts };
      this.diskProblem = null;
    } catch (err) {
      // A corrupt record is the master's to report; the dashboard shows what it last read.
      this.diskProblem = `the lease records could not be read: ${printable((err as Error).message, { max: 200 })}`;
      if (this.disk) this.disk.at = now;
      else this.disk = { at: now, tookMs: live.now() - start, counts: { leased: 0, committing: 0, expired: 0, done: 0 } };
    }
  }

  private rates(): { executionsPerSecond: number | null; generatedPerSecond: number | null } {
    const last = this.samples.at(-1);
    if (!last) return { executionsPerSecond: null, generatedPerSecond: null };
    let from = this.samples[0]!;
    for (const s of this.samples) if (last.t - s.t >= RATE_WINDOW_MS / 1000) from = s;
    const dt = last.t - from.t;
    if (dt <= 0) return { executionsPerSecond: null, generatedPerSecond: null };
    return { executionsPerSecond: round1((last.executions - from.executions) / dt), generatedPerSecond: round1((last.generated - from.generated) / dt) };
  }

  private series(): ExploreSeries {
    const s: ExploreSeries = { t: [], executionsPerSecond: [], unique: [], generated: [], redundancy: [] };
    this.samples.forEach((p, i) => {
      const prev = this.samples[i - 1];
      s.t.push(Math.round(p.t * 1000) / 1000);
      s.executionsPerSecond.push(prev && p.t > prev.t ? round1((p.executions - prev.executions) / (p.t - prev.t)) : 0);
      s.unique.push(p.unique);
      s.generated.push(p.generated);
      s.redundancy.push(p.generated > 0 ? Math.round((1000 * Math.max(0, p.generated - p.unique)) / p.generated) / 1000 : 0);
    });
    return s;
  }

  private masters(live: ExploreLive, untilEnd: number): MasterView[] {
    const m = live.master;
    // An ending that names its own phase (a quiescence state machine's) is asked; else the master's state says.
    const ending = live.ending() as { phase?: unknown } | null;
    const told = live.phase?.() ?? (ending && typeof ending.phase === "string" ? ending.phase : null);
    const phase =
      told ??
      (m.frozen
        ? "frozen (voted YES: a quiescence decision is pending)"
        : Number.isFinite(untilEnd)
          ? `idle window: ends in ${Math.max(0, untilEnd / 1000).toFixed(1)}s unless work appears`
          : m.idle
            ? live.role === "single"
              ? "idle (rescanning)"
              : "idle (waiting for the whole fleet)"
            : "working");
    const self: MasterView = { rank: live.rank, host: hostname(), self: true, phase };
    const peers = (live.peers?.() ?? []).map((p) => ({ rank: p.rank, host: p.host, self: false, phase: p.lost ? "lost" : "joined (its phase is its own)" }));
    return [self, ...peers].sort((a, b) => a.rank - b.rank);
  }

  private workers(live: ExploreLive, now: number): WorkerRow[] {
    const m = live.master;
    const active = new Set<number>();
    const holding = (key: string) =>
      m.activeOn(key).map((id) => {
        active.add(id);
        if (!this.taskSeen.has(id)) this.taskSeen.set(id, now);
        return { text: `task ${id}`, ageSeconds: round1((now - this.taskSeen.get(id)!) / 1000) };
      });
    const rows: WorkerRow[] = [];
    for (let i = 0; i < live.slots; i++) {
      const key = `local-${i}`;
      const held = holding(key);
      const q = m.quarantined.get(key);
      rows.push({ label: key, liveness: "alive", lastHeartbeatSeconds: 0, holding: held, note: q ? `quarantined: ${printable(q, { max: 120 })}` : held.length ? "local slot" : "local slot, idle" });
    }
    const remote = live.remote();
    if (remote) {
      const attached = new Set<string>();
      const hb = live.heartbeatSeconds;
      for (const w of remote.workers) {
        attached.add(w.label);
        const bytes = w.conn.socket.bytesRead;
        const h = this.heard.get(w.label);
        if (!h || h.bytes !== bytes) this.heard.set(w.label, { bytes, atMs: now });
        const silent = (now - this.heard.get(w.label)!.atMs) / 1000;
        const q = m.quarantined.get(w.key);
        rows.push({
          label: w.label,
          liveness: w.conn.closed ? "lost" : silent <= 3 * hb + 1 ? "alive" : silent <= live.leaseTtlMs / 1000 ? "slow" : "lost",
          lastHeartbeatSeconds: round1(silent),
          holding: holding(w.key),
          files: w.files,
          note: `-j ${w.jobs}, ${w.tasks} task(s) so far${w.files === "transfer" ? ", files over the connection" : ""}${q ? `; quarantined: ${printable(q, { max: 120 })}` : ""}`,
        });
      }
      for (const w of remote.everyone) {
        if (attached.has(w.label)) continue;
        rows.push({ label: w.label, liveness: "left", lastHeartbeatSeconds: null, holding: [], files: w.files, note: `${w.tasks} task(s); left: ${printable(w.gone ?? "disconnected", { max: 120 })}` });
      }
    }
    for (const id of this.taskSeen.keys()) if (!active.has(id)) this.taskSeen.delete(id);
    return rows;
  }
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
