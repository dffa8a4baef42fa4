// `failures --corpus DIR` and `export --corpus DIR`: the findings of explore campaigns, read from
// the corpus's state directory (<corpus>/.fuzzfleet/findings/) — every master's and worker's,
// since they all record there. The vocabulary follows the sweep's: a signature groups findings,
// each finding is one input (dedup by content hash) with the times it was seen and the target
// builds it was seen under; one a later build ran without a crash or hang is "not reproduced by
// build B" (the explore analogue of the sweep's `fixed`). Nothing here
// writes; records that do not validate are left out by the findings store, and every text taken
// from a target (its output tail, the input's bytes) goes through printable().
import { lstatSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { printable } from "../../core/log-lines.ts";
import { UsageError } from "../../errors.ts";
import { buildNote, describeFinding, FindingsStore, findingsDir, type FindingKind, type FindingRecord } from "../state/findings.ts";
import { stateDir } from "../state/work-dir.ts";
import { PinnedDir } from "../../files/pinned-dir.ts";

export interface ExploreFindingRow {
  input_hash: string;
  kind: FindingKind;
  /** "crash (signal 6)", "crash (exit 1)", "hang (timeout)". */
  outcome: string;
  signal: number | null;
  exit_code: number | null;
  times_seen: number;
  first_seen: string;
  last_seen: string;
  /** The target builds it was first and last seen under; null in records older than builds. */
  first_build: string | null;
  last_build: string | null;
  /** A later build that ran it without a crash or hang; null while it reproduces. */
  not_reproduced_by: string | null;
  stderr_tail: string;
}

export interface ExploreSignatureRow {
  signature: string;
  kind: FindingKind;
  /** Distinct inputs under this signature. */
  inputs: number;
  /** Every time one of them was seen (once per commit). */
  times_seen: number;
  first_seen: string;
  last_seen: string;
  findings: ExploreFindingRow[];
}

export interface ExploreFindingsData {
  corpus: string;
  /** not_reproduced: inputs a later build ran without a crash or hang. */
  totals: { signatures: number; inputs: number; crashes: number; hangs: number; times_seen: number; not_reproduced: number };
  signatures: ExploreSignatureRow[];
}

/**
 * The findings recorded on `corpusDir`. Refuses (UsageError, naming the fix) a directory that is
 * not an explore corpus: no state directory means no explore campaign ever ran there.
 */
export function exploreFindingsData(corpusDir: string): ExploreFindingsData {
  const state = stateDir(corpusDir);
  const st = lstatOrNull(corpusDir);
  if (!st || !st.isDirectory()) {
    throw new UsageError(`--corpus ${corpusDir}: not a directory; point --corpus at the -o directory of an explore campaign`);
  }
  const stateSt = lstatOrNull(state);
  if (!stateSt || !stateSt.isDirectory()) {
    throw new UsageError(`--corpus ${corpusDir}: no explore campaign ran here (no ${state}); point --corpus at the -o directory of an explore campaign`);
  }
  const records = new FindingsStore(findingsDir(state)).list();
  const by = new Map<string, FindingRecord[]>();
  for (const r of records) by.set(r.signature, [...(by.get(r.signature) ?? []), r]);
  const signatures = [...by.entries()]
    .map(([signature, rs]): ExploreSignatureRow => ({
      signature,
      kind: rs[0].kind,
      inputs: rs.length,
      times_seen: rs.reduce((n, r) => n + r.times_seen, 0),
      first_seen: rs.map((r) => r.first_seen).sort()[0],
      last_seen: rs.map((r) => r.last_seen).sort().at(-1)!,
      findings: rs.map(row),
    }))
    .sort((a, b) => b.inputs - a.inputs || a.signature.localeCompare(b.signature));
  return {
    corpus: corpusDir,
    totals: {
      signatures: signatures.length,
      inputs: records.length,
      crashes: records.filter((r) => r.kind === "crash").length,
      hangs: records.filter((r) => r.kind === "hang").length,
      times_seen: records.reduce((n, r) => n + r.times_seen, 0),
      not_reproduced: records.filter((r) => r.not_reproduced_by !== null).length,
    },
    signatures,
  };
}

function row(r: FindingRecord): ExploreFindingRow {
  return {
    input_hash: r.input_hash,
    kind: r.kind,
    outcome: describeFinding(r),
    signal: r.signal,
    exit_code: r.exit_code,
    times_seen: r.times_seen,
    first_seen: r.first_seen,
    last_seen: r.last_seen,
    first_build: r.first_build,
    last_build: r.last_build,
    not_reproduced_by: r.not_reproduced_by,
    stderr_tail: r.stderr_tail,
  };
}

/** One line per signature (largest first), its inputs below it; with verbose the output tail of each. */
export function renderExploreFindings(d: ExploreFindingsData, o: { verbose: boolean; lines: number }): string {
  const t = d.totals;
  if (t.inputs === 0) return `no findings recorded on ${printable(d.corpus)}: no run crashed or hung\n`;
  const out: string[] = [];
  out.push(
    `findings on ${printable(d.corpus)}: ${t.signatures} signature(s), ${t.inputs} input(s) (${t.crashes} crash(es), ${t.hangs} hang(s)), seen ${t.times_seen} time(s)` +
      `${t.not_reproduced > 0 ? `; ${t.not_reproduced} not reproduced by a later build` : ""}`,
  );
  for (const s of d.signatures) {
    out.push("");
    out.push(`${s.kind.padEnd(5)}  ${printable(s.signature, { max: 200 })}`);
    out.push(`       inputs ${s.inputs}  seen ${s.times_seen}  first ${s.first_seen}  last ${s.last_seen}`);
    for (const f of s.findings) {
      const builds = buildNote(f);
      out.push(`       ${f.input_hash.slice(0, 16)}  ${f.outcome}  seen ${f.times_seen}  first ${f.first_seen}${builds ? `  ${builds}` : ""}`);
      if (o.verbose) for (const line of tailLines(f.stderr_tail, o.lines)) out.push(`         | ${line}`);
    }
  }
  out.push("");
  out.push(`inputs are in ${printable(d.corpus)}/<hash>; 'fuzzfleet export --corpus ${printable(d.corpus)}' bundles them with their output`);
  return out.join("\n") + "\n";
}

const RULE = "=".repeat(72);
/** The largest input shown inline in a bundle; larger ones are named, not shown. */
const INPUT_SHOWN_BYTES = 64 * 1024;

/** A plain-text bundle: per signature, each input's outcome, output tail and bytes (as text). */
export function exportExploreFindings(d: ExploreFindingsData, o: { lines: number }): { text: string; findings: number } {
  const out: string[] = [];
  out.push("fuzzfleet findings export (explore)");
  out.push(`  exported     ${new Date().toISOString()} from ${hostname()}`);
  out.push(`  corpus       ${printable(d.corpus)}`);
  out.push(`  findings     ${d.totals.inputs} input(s) under ${d.totals.signatures} signature(s)`);
  out.push("");
  out.push("# Each finding carries its input as text; control characters are shown as \\xNN and the exact");
  out.push("# bytes are the corpus file named. Parse sections by their shown=N count, never by a delimiter.");
  let pin: PinnedDir | null = null;
  try {
    pin = PinnedDir.openNoFollow(d.corpus);
  } catch {
    pin = null;
  }
  try {
    for (const s of d.signatures) {
      for (const f of s.findings) {
        out.push("");
        out.push(RULE);
        out.push(`===== FINDING ${f.input_hash}  ${f.outcome}  seen=${f.times_seen}`);
        out.push(`      signature   ${printable(s.signature, { max: 4000 })}`);
        out.push(`      first seen  ${f.first_seen}`);
        out.push(`      last seen   ${f.last_seen}`);
        out.push(`      builds      first ${f.first_build ?? "not recorded"}, last ${f.last_build ?? "not recorded"}`);
        if (f.not_reproduced_by !== null) out.push(`      status      not reproduced by build ${f.not_reproduced_by}`);
        out.push(`      input file  ${printable(join(d.corpus, f.input_hash))}`);
        out.push("", ...section("output tail", tailLines(f.stderr_tail, o.lines), tailLines(f.stderr_tail, Infinity).length));
        out.push("", ...inputSection(pin, f.input_hash, o.lines));
      }
    }
  } finally {
    pin?.close();
  }
  out.push("");
  out.push(RULE);
  out.push(`end of export -- ${d.totals.inputs} finding(s)`);
  return { text: out.join("\n") + "\n", findings: d.totals.inputs };
}

function inputSection(pin: PinnedDir | null, hash: string, maxLines: number): string[] {
  if (!pin) return [`----- input  unreadable: the corpus directory cannot be opened`];
  try {
    const { bytes } = pin.readFile(hash, INPUT_SHOWN_BYTES);
    const lines = bytes.toString("utf8").split("\n");
    if (lines.at(-1) === "") lines.pop();
    return section("input", lines.slice(0, maxLines), lines.length);
  } catch (err) {
    return [`----- input  not shown: ${printable((err as Error).message, { max: 200 })}`];
  }
}

function section(name: string, shown: string[], total: number): string[] {
  const lines = shown.map((l) => printable(l, { tabs: true, max: 4000 }));
  return [`----- ${name}  shown=${lines.length} of ${total}`, ...lines];
}

function tailLines(tail: string, n: number): string[] {
  const lines = tail.split("\n").filter((l) => l.trim() !== "");
  return lines.slice(-n).map((l) => printable(l, { max: 300 }));
}

function lstatOrNull(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}
