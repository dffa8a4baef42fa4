// An explore campaign read from the files it leaves beside its corpus, for `fuzzfleet ui --corpus
// DIR` while nothing runs (or while a master runs elsewhere and this page only reads):
//
//   <corpus>/<sha256>                       the public corpus
//   <corpus>/.fuzzfleet/findings/*.json     every crash and hang found on this corpus
//   <corpus>/.fuzzfleet/explored/*.log      the explored ledger: one line per completed task (its hash and the target build)
//   <corpus>/.fuzzfleet/work-<epoch>/       an unfinished campaign: its lease records and baseline
//
// Nothing is written, nothing is created, nothing is read through a symlink: the state directory
// and every directory below it must be real directories (a link is reported and passed over).
// A clean end removes the work directory, so a finished campaign shows its corpus, findings,
// ledger (one line per task done) and the growth history its masters kept in
// <corpus>/.fuzzfleet/history/ (src/explore/state/history.ts); an unfinished one's history
// comes from its lease records.
//
// What it costs does not grow with the corpus once a campaign ended: the corpus's size comes from
// the masters' growth history (each writes the count it knows at its end), never from listing a
// corpus of a million objects (only an unfinished campaign, whose lease records are read whole,
// and one whose history predates that count have their directory's names counted); the ledgers are
// counted by their newlines, a mebibyte at a time, and then only what was appended; the findings
// store is read again only when its directory changed, and then only the records that changed.
import { lstatSync } from "node:fs";
import { join } from "node:path";
import { HEX64 } from "../../core/message-checks.ts";
import { printable } from "../../core/log-lines.ts";
import type { CampaignFiles } from "./files-view.ts";
import { FindingsReader, findingsDir, type FindingRecord } from "../state/findings.ts";
import { readLeaseRecordsNoWrite } from "../state/lease-journal.ts";
import type { LeaseRecord } from "../state/lease-table.ts";
import { ledgerDir, tallyLedger, type LedgerTally } from "../state/ledger.ts";
import { stateDir } from "../state/work-dir.ts";
import { HISTORY_SCHEMA, historyDir, type HistoryFile, type HistoryPoint } from "../state/history.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";
import { describeHolder, readLock } from "../../lock/campaign-lock.ts";
import type { ExploreFrontier, ExploreSeries, ExploreView } from "../../ui/source.ts";

const LEDGER_NAME = /^([0-9a-f]{64})-r(\d{1,4})\.log$/;
const WORK_NAME = /^work-([0-9a-f]{64})$/;
/** Most points on a plot. */
const MAX_POINTS = 240;
const BASELINE_MAX_BYTES = 256 * 1024 * 1024;
/** A history file holds at most 600 points of four numbers: far below this. */
const HISTORY_MAX_BYTES = 1024 * 1024;

type Read = ReturnType<CampaignFiles["read"]>;

/** What lstat says of `path`: a real directory, missing, or something else (a link, a file). */
function kindOf(path: string): "dir" | "missing" | "other" {
  try {
    return lstatSync(path).isDirectory() ? "dir" : "other";
  } catch {
    return "missing";
  }
}

export class ExploreCampaignFiles implements CampaignFiles {
  readonly state: string;
  /** Per ledger file: how far it was counted (a ledger only grows: the next read counts what was appended). */
  private readonly ledgerCounts = new Map<string, LedgerTally>();
  /** The findings as last read, and the findings directory's change time then. */
  private findingsRead: { ctimeMs: number; mtimeMs: number; records: FindingRecord[] } | null = null;
  private readonly findingsReader: FindingsReader;

  constructor(readonly corpusDir: string) {
    this.state = stateDir(corpusDir);
    this.findingsReader = new FindingsReader(findingsDir(this.state));
  }

  /** The state directory, if it is a real one (never a link). */
  private stateOk(): boolean {
    return kindOf(this.state) === "dir";
  }

  /** Every finding record; read again only when a record was written since (a write renames one in, which changes the directory). */
  findings(): FindingRecord[] {
    if (!this.stateOk()) return [];
    let st;
    try {
      st = lstatSync(findingsDir(this.state));
    } catch {
      return [];
    }
    if (!st.isDirectory()) return [];
    const c = this.findingsRead;
    if (c && c.ctimeMs === st.ctimeMs && c.mtimeMs === st.mtimeMs) return c.records;
    const records = this.findingsReader.list();
    this.findingsRead = { ctimeMs: st.ctimeMs, mtimeMs: st.mtimeMs, records };
    return records;
  }

  read(): Read {
    const notes: string[] = [];
    const empty: ExploreFrontier = { pending: null, inputBacklog: null, running: null, leased: 0, committing: 0, expired: 0, done: 0, leaseCountsAgeSeconds: null };
    const series: ExploreSeries = { t: [], executionsPerSecond: [], unique: [], generated: [], redundancy: [] };
    const base: Read = {
      headline: "",
      epoch: null,
      epochExecutions: 0,
      frontier: empty,
      totals: { executions: 0, generated: null, unique: null, redundant: null, corpus: 0, externalInputs: null, skippedExplored: null, problems: null },
      series,
      masters: [],
    };
    const st = kindOf(this.state);
    if (st !== "dir") {
      base.totals.corpus = this.countCorpus();
      base.headline = st === "missing" ? `no explore state beside this corpus (${this.state}): only the corpus is shown` : `${this.state} is not a directory (a link?): it is not read`;
      return base;
    }
    const ledger = this.ledger(notes);
    const works = this.workDirs(notes);
    const latest = works.at(-1) ?? null;
    base.epoch = latest?.epoch ?? ledger.latest;
    base.totals.executions = ledger.lines;
    base.epochExecutions = ledger.byEpoch.get(base.epoch ?? "") ?? 0;
    base.masters = [...(ledger.ranks.get(base.epoch ?? "") ?? [])].sort((a, b) => a - b);
    if (latest) {
      const records = this.leaseRecords(latest.dir, notes);
      if (records) {
        const counts = { leased: 0, committing: 0, done: 0 };
        for (const r of records) counts[r.status]++;
        base.frontier = { ...empty, ...counts, leaseCountsAgeSeconds: 0 };
        const history = historyOf(records, this.baseline(latest.dir));
        base.series = history.series;
        base.totals = { ...base.totals, generated: history.generated, unique: history.unique, redundant: Math.max(0, history.generated - history.unique) };
      }
    }
    const kept = base.epoch !== null ? this.history(base.epoch, notes) : null;
    // A finished campaign's masters wrote their last count at its end; an unfinished one's may be
    // seconds old (or its master killed), and its lease records are read whole anyway.
    base.totals.corpus = (latest ? null : kept?.corpus) ?? this.countCorpus();
    if (base.series.t.length === 0) {
      // A finished campaign (its work directory removed): the history its masters kept.
      if (kept) {
        base.series = kept.series;
        // The masters' own counters, as the final statistics print them (the ledger also holds lines of other sessions).
        base.totals = { ...base.totals, executions: kept.executions, generated: kept.generated, unique: kept.unique, redundant: Math.max(0, kept.generated - kept.unique) };
      }
    }
    // Every completed task leaves one ledger line: with no lease records left, that is the tasks done.
    if (!latest) base.frontier = { ...base.frontier, done: ledger.lines };
    const lock = this.stateOk() ? readLock(this.state) : null;
    base.headline = lock
      ? `${describeHolder(lock)}; this page reads its files (explore --ui serves the live page)`
      : works.length > 0
        ? `nothing running: ${works.length} unfinished epoch(s) kept for --resume (latest ${latest!.epoch.slice(0, 12)}…)`
        : "nothing running: the last campaign ended cleanly (its hidden state was removed; the corpus, findings and explored ledger remain)";
    if (notes.length) base.headline += ` — ${notes.map((n) => printable(n, { max: 200 })).join("; ")}`;
    return base;
  }

  /** Lines of every ledger (each read and its complete lines counted: a line is a hash, or a hash and its build), per epoch and rank. */
  private ledger(notes: string[]): { lines: number; byEpoch: Map<string, number>; latest: string | null; ranks: Map<string, Set<number>> } {
    const out = { lines: 0, byEpoch: new Map<string, number>(), latest: null as string | null, ranks: new Map<string, Set<number>>() };
    const dir = ledgerDir(this.state);
    const kind = kindOf(dir);
    if (kind === "missing") return out;
    if (kind === "other") {
      notes.push(`${dir} is not a directory; the explored ledger is not read`);
      return out;
    }
    const pin = PinnedDir.openNoFollow(dir);
    try {
      let newest = -1;
      for (const e of pin.list()) {
        const m = LEDGER_NAME.exec(e.name);
        if (!m || e.kind !== "file") continue;
        const s = pin.lstat(e.name);
        if (!s) continue;
        const known = this.ledgerCounts.get(e.name) ?? null;
        const tally = known && known.ino === s.ino && known.offset === s.size ? known : tallyLedger(pin, e.name, known);
        if (tally) this.ledgerCounts.set(e.name, tally);
        const lines = tally?.lines ?? 0;
        out.lines += lines;
        out.byEpoch.set(m[1]!, (out.byEpoch.get(m[1]!) ?? 0) + lines);
        const ranks = out.ranks.get(m[1]!) ?? new Set<number>();
        ranks.add(Number(m[2]));
        out.ranks.set(m[1]!, ranks);
        if (s.mtimeMs > newest) {
          newest = s.mtimeMs;
          out.latest = m[1]!;
        }
      }
    } finally {
      pin.close();
    }
    return out;
  }

  /** The growth history the masters of `epoch` kept (src/explore/state/history.ts), summed over them; null when none. */
  private history(epoch: string, notes: string[]): (ReturnType<typeof seriesOfHistory> & { corpus: number | null }) | null {
    const dir = historyDir(this.state);
    const kind = kindOf(dir);
    if (kind !== "dir") {
      if (kind === "other") notes.push(`${dir} is not a directory; the growth history is not read`);
      return null;
    }
    const files: HistoryPoint[][] = [];
    let corpus: number | null = null;
    const pin = PinnedDir.openNoFollow(dir);
    try {
      for (const e of pin.list()) {
        if (e.kind !== "file" || !e.name.startsWith(`${epoch}-r`) || !e.name.endsWith(".json")) continue;
        try {
          const f = JSON.parse(pin.readFile(e.name, HISTORY_MAX_BYTES).bytes.toString("utf8")) as Partial<HistoryFile>;
          if (f.schema !== HISTORY_SCHEMA || f.epoch !== epoch || !Array.isArray(f.points)) throw new Error("not a history file of this epoch");
          const points = f.points.filter((p): p is HistoryPoint => Array.isArray(p) && p.length === 4 && p.every((x) => typeof x === "number" && Number.isFinite(x)));
          if (points.length > 0) files.push(points);
          // Every master knew the whole corpus (or the part it had listed): the largest count is the nearest.
          if (Number.isSafeInteger(f.corpus) && f.corpus! >= 0) corpus = Math.max(corpus ?? 0, f.corpus!);
        } catch (err) {
          notes.push(`${join(dir, e.name)} could not be read (${(err as Error).message}); its master's history is left out`);
        }
      }
    } finally {
      pin.close();
    }
    return files.length > 0 ? { ...seriesOfHistory(files), corpus } : null;
  }

  /**
   * The corpus's size for a campaign whose history does not keep it (older than that count, or
   * none): the hash-named regular files of its directory, by the kinds the listing gives (no stat
   * of each). The one read here that grows with the corpus.
   */
  private countCorpus(): number {
    let pin: PinnedDir;
    try {
      pin = PinnedDir.openNoFollow(this.corpusDir);
    } catch {
      return 0;
    }
    try {
      let n = 0;
      for (const e of pin.list()) if (e.kind === "file" && HEX64.test(e.name)) n++;
      return n;
    } finally {
      pin.close();
    }
  }

  /** Work directories of unfinished epochs, oldest first (by their state.json). */
  private workDirs(notes: string[]): { epoch: string; dir: string; at: number }[] {
    const pin = PinnedDir.openNoFollow(this.state);
    try {
      const found: { epoch: string; dir: string; at: number }[] = [];
      for (const e of pin.list()) {
        const m = WORK_NAME.exec(e.name);
        if (!m) continue;
        if (e.kind !== "directory") {
          notes.push(`${e.name} is not a directory; not read`);
          continue;
        }
        const dir = join(this.state, e.name);
        let at = 0;
        try {
          const s = lstatSync(join(dir, "state.json"));
          at = s.isFile() ? s.mtimeMs : 0;
        } catch {
          // No state.json: an epoch being created; shown all the same.
        }
        found.push({ epoch: m[1]!, dir, at });
      }
      return found.sort((a, b) => a.at - b.at);
    } finally {
      pin.close();
    }
  }

  /** The lease records of a work directory; null when it has none (or they cannot be read). */
  private leaseRecords(work: string, notes: string[]): LeaseRecord[] | null {
    const root = join(work, "leases");
    const kind = kindOf(root);
    if (kind !== "dir") {
      if (kind === "other") notes.push(`${root} is not a directory; the lease records are not read`);
      return null;
    }
    try {
      // Read as they lie: a journal left behind is laid over the record files in memory, never absorbed.
      return readLeaseRecordsNoWrite(root);
    } catch (err) {
      notes.push(`the lease records could not be read: ${(err as Error).message}`);
      return null;
    }
  }

  /** The corpus objects there before the epoch began (never counted as new). */
  private baseline(work: string): Set<string> {
    let pin: PinnedDir | null = null;
    try {
      pin = PinnedDir.openNoFollow(work);
      return new Set(pin.readFile("preexisting", BASELINE_MAX_BYTES).bytes.toString("latin1").split("\n").filter((l) => HEX64.test(l)));
    } catch {
      return new Set();
    } finally {
      pin?.close();
    }
  }
}

/**
 * Executions, generated and unique children over time, from the done records: each commit at
 * its completion time; a child is unique the first time a commit publishes it, unless it was an
 * initial input or in the corpus before the epoch.
 */
export function historyOf(records: readonly LeaseRecord[], baseline: ReadonlySet<string>): { series: ExploreSeries; generated: number; unique: number } {
  const initial = new Set(records.filter((r) => r.payload.origin === "initial").map((r) => r.id));
  const done = records.filter((r) => r.status === "done" && r.commit && r.commit.worker !== "budget" && r.completed !== undefined).sort((a, b) => a.completed! - b.completed!);
  const seen = new Set<string>();
  const series: ExploreSeries = { t: [], executionsPerSecond: [], unique: [], generated: [], redundancy: [] };
  let generated = 0;
  let unique = 0;
  if (done.length === 0) return { series, generated, unique };
  const start = Math.floor(done[0]!.completed! / 1000);
  const end = Math.ceil(done.at(-1)!.completed! / 1000);
  const width = Math.max(1, Math.ceil((end - start) / MAX_POINTS));
  const n = Math.max(1, Math.ceil((end - start) / width));
  const per = Array.from({ length: n }, () => ({ executions: 0, generated: 0, unique: 0 }));
  for (const r of done) {
    const b = per[Math.min(n - 1, Math.floor((r.completed! / 1000 - start) / width))]!;
    b.executions++;
    b.generated += r.commit!.num_generated;
    for (const h of r.commit!.hashes) {
      if (seen.has(h)) continue;
      seen.add(h);
      if (!initial.has(h) && !baseline.has(h)) b.unique++;
    }
  }
  per.forEach((b, i) => {
    generated += b.generated;
    unique += b.unique;
    series.t.push(start + (i + 1) * width);
    series.executionsPerSecond.push(Math.round((10 * b.executions) / width) / 10);
    series.generated.push(generated);
    series.unique.push(unique);
    series.redundancy.push(generated > 0 ? Math.round((1000 * Math.max(0, generated - unique)) / generated) / 1000 : 0);
  });
  return { series, generated, unique };
}

/**
 * The plots from the masters' kept histories: at each time any master took a point, the sum of
 * every master's latest values (cumulative counters), thinned to MAX_POINTS.
 */
export function seriesOfHistory(files: readonly (readonly HistoryPoint[])[]): { series: ExploreSeries; executions: number; generated: number; unique: number } {
  const times = [...new Set(files.flatMap((f) => f.map((p) => p[0])))].sort((a, b) => a - b);
  const step = Math.max(1, Math.ceil(times.length / MAX_POINTS));
  const chosen = times.filter((_, i) => i % step === 0 || i === times.length - 1);
  const at = chosen.map((t) => {
    const sum = [t, 0, 0, 0];
    for (const f of files) {
      let last: HistoryPoint | null = null;
      for (const p of f) if (p[0] <= t) last = p;
      if (last) for (let k = 1; k < 4; k++) sum[k]! += last[k]!;
    }
    return sum as HistoryPoint;
  });
  const series: ExploreSeries = { t: [], executionsPerSecond: [], unique: [], generated: [], redundancy: [] };
  at.forEach((p, i) => {
    const prev = at[i - 1];
    series.t.push(Math.round(p[0] * 1000) / 1000);
    series.executionsPerSecond.push(prev && p[0] > prev[0] ? Math.round((10 * (p[1] - prev[1])) / (p[0] - prev[0])) / 10 : 0);
    series.generated.push(p[2]);
    series.unique.push(p[3]);
    series.redundancy.push(p[2] > 0 ? Math.round((1000 * Math.max(0, p[2] - p[3])) / p[2]) / 1000 : 0);
  });
  const last = at.at(-1)!;
  return { series, executions: last[1], generated: last[2], unique: last[3] };
}
