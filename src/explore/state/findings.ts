// Findings of explore campaigns: the inputs that crashed or hung the target. A run is a finding
// when it ended by a signal, by a sanitizer's error exit, or by the per-run timeout. Findings are
// kept beside the corpus in the hidden state directory, outside every campaign's work directory,
// so they outlive the campaign that found them:
//
//   <corpus>/.fuzzfleet/findings/<input hash>.json        one record per input (dedup by hash)
//   <corpus>/.fuzzfleet/findings/<input hash>.json.lock   its flock, never unlinked (file-lock.ts)
//
// A record is written whole (temp file + fsync + rename + directory fsync) under its lock: a
// finding is an outcome, so it is durable at once, whatever the lease table's durability. It is
// counted once per commit fence: the fences it was counted under are kept, and recording the same
// fence again (a replayed or repeated result) changes nothing. Every master of a campaign records
// into the same directory, so the view is fleet-wide. Records are grouped by a signature (a
// sanitizer's SUMMARY line and top frames, else the signal or timeout and the last non-empty line
// of output with addresses and numbers normalised), computed here from the reported tail and
// never taken from an executor. The tail is redacted before anything is computed from it or
// written: the campaign token (and any other secret the recording command knows) never reaches a
// record, so neither the dashboard nor a report, an export or the statistics can show it.
//
// A record names the target builds (state/target-identity.ts) it was first and last seen under.
// When a later build runs the input and it neither crashes nor hangs, the record says so
// (`not_reproduced_by`), the way a sweep marks a failure fixed; seen again by any build, it is open
// again. A record written before builds were recorded names none (null).
import { readdirSync } from "node:fs";
import { constants as osConstants } from "node:os";
import { join } from "node:path";
import { HEX64 } from "../../core/message-checks.ts";
import { redactNothing, type Redact } from "../../exec/secrets.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";
import type { FindingKind, RunFinding } from "../task.ts";
import { mkdirDurable, writeFileAtomic } from "./durable.ts";
import { withFileLock } from "./file-lock.ts";
import { isBuildId } from "./target-identity.ts";

/** How much of the end of a run's output a finding keeps (bytes). */
export const TAIL_BYTES = 2048;
/** How many fences a record remembers (the last ones): enough to refuse any replay of a recent commit. */
const MAX_FENCES = 64;
const SCHEMA = "fuzzfleet-finding-v1";
const RECORD_BYTES = 64 * 1024;

export type { FindingKind, RunFinding } from "../task.ts";

export interface FindingRecord extends RunFinding {
  schema: typeof SCHEMA;
  input_hash: string;
  signature: string;
  /** ISO time of the first commit that recorded it. */
  first_seen: string;
  last_seen: string;
  times_seen: number;
  fences: string[];
  /** The target build of the first and of the last commit that recorded it; null in records older than builds. */
  first_build: string | null;
  last_build: string | null;
  /** A build after last_build that ran the input without a crash or hang; null while it reproduces. */
  not_reproduced_by: string | null;
}

export interface FindingGroup {
  signature: string;
  kind: FindingKind;
  inputs: string[];
}

/** Whether the outcome of a run makes it a finding, and which. `tail` is read only when it may matter. */
export function classifyRun(run: { outcome: string; exitCode: number | null; signal: string | null }, tail: () => string): RunFinding | null {
  if (run.outcome === "timeout") return { kind: "hang", signal: null, exit_code: null, stderr_tail: tail() };
  if (run.outcome !== "complete") return null;
  if (run.signal !== null) {
    const n = (osConstants.signals as Record<string, number>)[run.signal] ?? null;
    return { kind: "crash", signal: n, exit_code: null, stderr_tail: tail() };
  }
  if (run.exitCode !== null && run.exitCode !== 0) {
    const t = tail();
    if (SANITIZER_ERROR.test(t)) return { kind: "crash", signal: null, exit_code: run.exitCode, stderr_tail: t };
  }
  return null;
}

const SANITIZER_ERROR = /(^|\n)(==\d+==ERROR: \w*Sanitizer|SUMMARY: \w*Sanitizer)/;
const SUMMARY = /^SUMMARY: (\w*Sanitizer: .*)$/m;
const FRAME = /^\s*#\d+ 0x[0-9a-fA-F]+ in (\S+)/gm;

/** Addresses, hex and decimal numbers replaced, whitespace collapsed, bounded. */
export function normaliseLine(line: string): string {
  return line
    .replace(/0x[0-9a-fA-F]+/g, "<addr>")
    .replace(/\b[0-9a-fA-F]{8,}\b/g, "<hex>")
    .replace(/\d+/g, "<n>")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 200);
}

/** "crash (signal 6)", "crash (exit 1)", "hang (timeout)". */
export function describeFinding(f: RunFinding): string {
  return f.kind === "hang" ? "hang (timeout)" : f.signal !== null ? `crash (signal ${f.signal})` : `crash (exit ${f.exit_code})`;
}

/**
 * The builds of a record in words, for every view: "build A" or "builds A → B" (first, last), then
 * "not reproduced by build C" when a later build ran it without a crash or hang; "" when the
 * record is older than builds.
 */
export function buildNote(r: { first_build: string | null; last_build: string | null; not_reproduced_by: string | null }): string {
  const parts: string[] = [];
  if (r.first_build !== null && r.last_build !== null) parts.push(r.first_build === r.last_build ? `build ${r.first_build}` : `builds ${r.first_build} → ${r.last_build}`);
  if (r.not_reproduced_by !== null) parts.push(`not reproduced by build ${r.not_reproduced_by}`);
  return parts.join(", ");
}

/** The group a finding belongs to. */
export function signatureOf(f: RunFinding): string {
  const summary = SUMMARY.exec(f.stderr_tail);
  if (summary) {
    const frames = [...f.stderr_tail.matchAll(FRAME)].slice(0, 3).map((m) => m[1]);
    return [normaliseLine(summary[1]), ...frames].join(" | ");
  }
  const head = f.kind === "hang" ? "timeout" : f.signal !== null ? `signal ${f.signal}` : `exit ${f.exit_code}`;
  const last = f.stderr_tail.split("\n").map((l) => l.trim()).filter((l) => l !== "").at(-1);
  return last === undefined ? head : `${head} | ${normaliseLine(last)}`;
}

/** The fields of a finding an executor reported, checked; the problem in words, or null. */
export function findingProblem(f: unknown): string | null {
  if (typeof f !== "object" || f === null) return "the finding is not an object";
  const x = f as Record<string, unknown>;
  if (x.kind !== "crash" && x.kind !== "hang") return `finding kind ${JSON.stringify(x.kind)} is neither "crash" nor "hang"`;
  const small = (v: unknown, max: number) => v === null || (Number.isInteger(v) && (v as number) >= 0 && (v as number) <= max);
  if (!small(x.signal, 128)) return "finding signal must be null or an integer from 0 to 128";
  if (!small(x.exit_code, 255)) return "finding exit_code must be null or an integer from 0 to 255";
  if (typeof x.stderr_tail !== "string" || x.stderr_tail.length > 2 * TAIL_BYTES) return `finding stderr_tail must be a string of at most ${2 * TAIL_BYTES} characters`;
  if (x.kind === "crash" && x.signal === null && x.exit_code === null) return "a crash finding names its signal or its exit code";
  return null;
}

export function findingsDir(stateDir: string): string {
  return join(stateDir, "findings");
}

export interface FindingsStoreOptions {
  /** Default 30 000 ms. */
  lockTimeoutMs?: number;
  /** Applied to every output tail before it is recorded (the campaign's secrets); default: none. */
  redact?: Redact;
}

export class FindingsStore {
  private ready = false;
  private readonly lockTimeoutMs: number;
  private readonly redact: Redact;
  private readonly listeners: ((r: FindingRecord) => void)[] = [];

  constructor(
    readonly dir: string,
    o: FindingsStoreOptions = {},
  ) {
    this.lockTimeoutMs = o.lockTimeoutMs ?? 30_000;
    this.redact = o.redact ?? redactNothing;
  }

  /**
   * Records that the input `hash` was found crashing or hanging by the commit under `fence`.
   * "new": first record of this input; "again": seen before, under other fences; "already": this
   * fence was recorded before (nothing changes).
   */
  record(hash: string, fence: string, reported: RunFinding, now: Date, build: string): "new" | "again" | "already" {
    if (!HEX64.test(hash)) throw new Error(`not a content hash: ${hash}`);
    const f = { ...reported, stderr_tail: this.redact(reported.stderr_tail) };
    if (!this.ready) {
      mkdirDurable(this.dir);
      this.ready = true;
    }
    const path = join(this.dir, `${hash}.json`);
    return withFileLock(`${path}.lock`, this.lockTimeoutMs, () => {
      const old = this.read(hash);
      if (old?.fences.includes(fence)) return "already";
      const at = now.toISOString();
      const next: FindingRecord = old
        ? { ...old, last_seen: at, times_seen: old.times_seen + 1, fences: [...old.fences, fence].slice(-MAX_FENCES), last_build: build, not_reproduced_by: null }
        : {
            schema: SCHEMA,
            input_hash: hash,
            ...pick(f),
            signature: signatureOf(f),
            first_seen: at,
            last_seen: at,
            times_seen: 1,
            fences: [fence],
            first_build: build,
            last_build: build,
            not_reproduced_by: null,
          };
      writeFileAtomic(path, JSON.stringify(next) + "\n");
      this.tell(next);
      return old ? "again" : "new";
    });
  }

  /**
   * Records that `build` ran the recorded input `hash` and it neither crashed nor hung. Only a
   * build other than the one that last reproduced it counts (the same build missing it once is a
   * flaky finding, not a fixed one). Returns whether the record changed.
   */
  notReproduced(hash: string, build: string): boolean {
    if (!HEX64.test(hash)) throw new Error(`not a content hash: ${hash}`);
    const path = join(this.dir, `${hash}.json`);
    return withFileLock(`${path}.lock`, this.lockTimeoutMs, () => {
      const old = this.read(hash);
      if (!old || old.last_build === build || old.not_reproduced_by === build) return false;
      const next = { ...old, not_reproduced_by: build };
      writeFileAtomic(path, JSON.stringify(next) + "\n");
      this.tell(next);
      return true;
    });
  }

  /** Calls `fn` with every record this store writes, once written (a live view keeps them without reading them back). */
  onRecorded(fn: (r: FindingRecord) => void): void {
    this.listeners.push(fn);
  }

  private tell(r: FindingRecord): void {
    for (const fn of this.listeners) fn(r);
  }

  /** Every valid record, sorted by first_seen then hash. Records that do not validate are left out (and left alone). */
  list(): FindingRecord[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    const out: FindingRecord[] = [];
    for (const n of names) {
      const m = /^([0-9a-f]{64})\.json$/.exec(n);
      if (!m) continue;
      const r = this.read(m[1]);
      if (r) out.push(r);
    }
    return out.sort((a, b) => a.first_seen.localeCompare(b.first_seen) || a.input_hash.localeCompare(b.input_hash));
  }

  /** The records grouped by signature, largest group first. */
  groups(records = this.list()): FindingGroup[] {
    const by = new Map<string, FindingGroup>();
    for (const r of records) {
      const g = by.get(r.signature) ?? { signature: r.signature, kind: r.kind, inputs: [] };
      g.inputs.push(r.input_hash);
      by.set(r.signature, g);
    }
    return [...by.values()].sort((a, b) => b.inputs.length - a.inputs.length || a.signature.localeCompare(b.signature));
  }

  /** A record, read without following a symlink; null when absent or invalid. */
  private read(hash: string): FindingRecord | null {
    let pin: PinnedDir;
    try {
      pin = PinnedDir.openNoFollow(this.dir);
    } catch {
      return null;
    }
    try {
      return readRecord(pin, hash);
    } finally {
      pin.close();
    }
  }
}

/**
 * The findings of a store, kept between reads for a view that asks again and again (a dashboard):
 * it knows the identity of each record (inode, size, mtime: a record is only ever replaced by a
 * rename) and reads again only the records that changed or appeared. list() looks over every
 * record at once (a view that is no live event loop); step() looks over at most a bounded number
 * per call, going on from where the last call stopped, so a live master's dashboard never spends
 * one turn of its loop on ten thousand records: a pass over the directory is spread over calls.
 * What the master records itself is noted at once (note()), without waiting for a pass.
 */
export class FindingsReader {
  /** By file name; `noted`: the pass under way when the caller noted it (its listing may be older than the record). */
  private readonly known = new Map<string, { ino: number; size: number; mtimeMs: number; record: FindingRecord | null; noted?: object | null }>();
  /** The names of the pass under way (from one listing) and how far it got; null between passes. */
  private pass: { names: string[]; next: number; present: Set<string> } | null = null;
  private sorted: FindingRecord[] | null = null;

  constructor(readonly dir: string) {}

  /** Every valid record, as FindingsStore.list() gives them: a whole pass at once. */
  list(): FindingRecord[] {
    this.pass = null;
    this.step(Infinity);
    return [...this.records()];
  }

  /** The records known now, sorted by first_seen then hash. */
  records(): FindingRecord[] {
    if (!this.sorted) {
      const out: FindingRecord[] = [];
      for (const k of this.known.values()) if (k.record) out.push(k.record);
      // Code-unit order: the ISO times and hex hashes compared are ASCII of one format.
      this.sorted = out.sort((a, b) => cmp(a.first_seen, b.first_seen) || cmp(a.input_hash, b.input_hash));
    }
    return this.sorted;
  }

  /** Whether a pass is under way (a step() would go on with it rather than list the directory again). */
  get passing(): boolean {
    return this.pass !== null;
  }

  /** A record the caller just wrote: known at once; the next pass reads it again (its identity is not known). */
  note(record: FindingRecord): void {
    this.known.set(`${record.input_hash}.json`, { ino: -1, size: -1, mtimeMs: -1, record, noted: this.pass });
    this.sorted = null;
  }

  /**
   * Goes on with the pass over the directory: at most `max` records stat'ed (and read when they
   * changed) in this call; a call with no pass under way lists the directory first. Returns
   * whether the pass ended with this call (records gone from the directory are then forgotten).
   */
  step(max: number): boolean {
    let pin: PinnedDir;
    try {
      pin = PinnedDir.openNoFollow(this.dir);
    } catch {
      if (this.known.size) this.sorted = null;
      this.known.clear();
      this.pass = null;
      return true;
    }
    try {
      if (!this.pass) {
        const names: string[] = [];
        for (const e of pin.list()) if (e.kind === "file" && /^[0-9a-f]{64}\.json$/.test(e.name)) names.push(e.name);
        this.pass = { names, next: 0, present: new Set() };
      }
      const p = this.pass;
      const end = Math.min(p.names.length, p.next + max);
      for (; p.next < end; p.next++) {
        const name = p.names[p.next]!;
        const st = pin.lstat(name);
        if (!st?.isFile()) continue;
        p.present.add(name);
        const k = this.known.get(name);
        if (!k || k.ino !== st.ino || k.size !== st.size || k.mtimeMs !== st.mtimeMs) {
          this.known.set(name, { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, record: readRecord(pin, name.slice(0, 64)) });
          this.sorted = null;
        }
      }
      if (p.next < p.names.length) return false;
      for (const name of this.known.keys()) {
        if (p.present.has(name)) continue;
        // Noted since this pass listed the directory: kept until a pass that could have seen it.
        if (this.known.get(name)!.noted === p) continue;
        this.known.delete(name);
        this.sorted = null;
      }
      this.pass = null;
      return true;
    } finally {
      pin.close();
    }
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The record of `hash` in the pinned findings directory; null when absent or invalid. */
function readRecord(pin: PinnedDir, hash: string): FindingRecord | null {
  try {
    const { bytes } = pin.readFile(`${hash}.json`, RECORD_BYTES);
    const r = JSON.parse(bytes.toString("utf8")) as FindingRecord;
    if (r.schema !== SCHEMA || r.input_hash !== hash || findingProblem(r) !== null) return null;
    if (!Number.isInteger(r.times_seen) || !Array.isArray(r.fences) || typeof r.signature !== "string") return null;
    const build = (b: unknown) => (isBuildId(b) ? b : null);
    return { ...r, first_build: build(r.first_build), last_build: build(r.last_build), not_reproduced_by: build(r.not_reproduced_by) };
  } catch {
    return null;
  }
}

function pick(f: RunFinding): RunFinding {
  return { kind: f.kind, signal: f.signal, exit_code: f.exit_code, stderr_tail: f.stderr_tail };
}
