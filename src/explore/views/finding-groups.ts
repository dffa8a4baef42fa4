// Findings of an explore campaign as the dashboard shows them: records grouped by signature,
// largest group first (as the final statistics list them), each group with its counts, its first
// and last sighting and an example input; and the repro line of an input. The records are the
// findings store's (explore/state/findings.ts), described here by the fields read.
import type { ExploreFindingView } from "../../ui/source.ts";

/** Findings groups shown; the final statistics list them all. */
const FINDINGS_SHOWN = 100;

/** The fields of a finding record the dashboard reads. */
export interface FindingLike {
  input_hash: string;
  signature: string;
  kind: "crash" | "hang";
  times_seen: number;
  first_seen: string;
  last_seen: string;
}

export interface Group<R extends FindingLike> {
  signature: string;
  kind: "crash" | "hang";
  records: R[];
}

/** Records grouped by signature, largest group first (as the final statistics list them). */
export function groupFindings<R extends FindingLike>(records: readonly R[]): Group<R>[] {
  const by = new Map<string, Group<R>>();
  for (const r of records) {
    const g = by.get(r.signature) ?? { signature: r.signature, kind: r.kind, records: [] };
    g.records.push(r);
    by.set(r.signature, g);
  }
  return [...by.values()].sort((a, b) => b.records.length - a.records.length || a.signature.localeCompare(b.signature));
}

export function findingsView(records: readonly FindingLike[]): { findings: ExploreFindingView[]; findingsTotal: { inputs: number; crashes: number; hangs: number; signatures: number } } {
  const groups = groupFindings(records);
  return {
    findings: groups.slice(0, FINDINGS_SHOWN).map((g, i) => ({
      id: i + 1,
      signature: g.signature,
      kind: g.kind,
      inputs: g.records.length,
      timesSeen: g.records.reduce((n, r) => n + r.times_seen, 0),
      firstSeen: g.records.reduce((t, r) => (r.first_seen < t ? r.first_seen : t), g.records[0]!.first_seen),
      lastSeen: g.records.reduce((t, r) => (r.last_seen > t ? r.last_seen : t), g.records[0]!.last_seen),
      example: g.records[0]!.input_hash,
    })),
    findingsTotal: {
      inputs: records.length,
      crashes: records.filter((r) => r.kind === "crash").length,
      hangs: records.filter((r) => r.kind === "hang").length,
      signatures: groups.length,
    },
  };
}

/** The target's command line on one input, quoted for a POSIX shell: `@@` is the path, else stdin. */
export function reproLine(target: readonly string[], input: string): string {
  const q = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  const fileMode = target.some((a) => a.includes("@@"));
  const argv = target.map((a) => q(a.replaceAll("@@", input)));
  return fileMode ? argv.join(" ") : `${argv.join(" ")} < ${q(input)}`;
}
