// The live section of a distributed session: workers, their -j and rates, chunks in flight and
// how long each has run, ranges queued for re-sweep. Served by `status --master` after the
// store's report, and printed by the coordinator every few minutes.
import { formatDuration } from "../../config/duration.ts";
import { formatInt } from "../../config/format.ts";

export interface LiveData {
  coordinator: string;
  session: number;
  elapsed_seconds: number;
  budget_seconds: number;
  draining: string | null;
  /** files: "shared" (the shared directory) or "transfer" (its files come over the connection); absent from an older coordinator. */
  workers: { label: string; jobs: number; chunks: number; seeds: number; rates: Record<string, number | null>; not_taking: string[]; files?: "shared" | "transfer" }[];
  in_flight: { chunk_id: number; lane: string; seed_from: number; seed_to: number; running_seconds: number; worker: string }[];
  queued: { lane: string; seeds: number }[];
}

/**
 * The coordinator's terminal view: the same picture as renderLive, cut to `maxLines` (the chunks
 * in flight that do not fit are counted, not shown), so it redraws in place on any terminal.
 */
export function liveViewLines(d: LiveData, maxLines: number): string[] {
  const lines = renderLive(d).replace(/\n$/, "").split("\n");
  if (lines.length <= maxLines) return lines;
  const kept = lines.slice(0, Math.max(1, maxLines - 1));
  return [...kept, `  … ${lines.length - kept.length} more line(s): fuzzfleet status --master ${d.coordinator} shows them all`];
}

export function renderLive(d: LiveData): string {
  const out: string[] = [];
  out.push(
    `coordinator on ${d.coordinator} — session ${d.session}, ${formatDuration(d.elapsed_seconds)} of ${formatDuration(d.budget_seconds)} elapsed${
      d.draining ? `  DRAINING (${d.draining})` : ""
    }`,
  );
  if (d.workers.length === 0) out.push("  no workers attached");
  for (const w of d.workers) {
    const rates = Object.entries(w.rates)
      .filter(([, r]) => r !== null)
      .map(([lane, r]) => `${lane} ${(r as number).toFixed(1)}/s`);
    out.push(
      `  ${w.label.padEnd(20)} -j ${String(w.jobs).padEnd(3)} ${formatInt(w.chunks)} chunks, ${formatInt(w.seeds)} seeds${rates.length ? `  (${rates.join(", ")})` : ""}`,
    );
    if (w.files === "transfer") out.push("      files: over the connection (no shared directory)");
    if (w.not_taking.length) out.push(`      not taking: ${w.not_taking.join(", ")}`);
  }
  if (d.in_flight.length) {
    out.push("  in flight:");
    for (const f of d.in_flight) {
      out.push(
        `    #${String(f.chunk_id).padEnd(5)} ${f.lane.padEnd(16)} ${formatInt(f.seed_from)}..${formatInt(f.seed_to)}  ${formatDuration(
          f.running_seconds,
        )} on ${f.worker}`,
      );
    }
  }
  for (const q of d.queued) out.push(`  ${q.lane.padEnd(16)} ${formatInt(q.seeds)} seed(s) queued for re-sweep`);
  return out.join("\n") + "\n";
}
