// `export`: a plain-text bundle of failures to hand to whoever fixes them. Each failure carries
// its minimized input as text. Sections state how many lines they show ("shown=N of M"), so a
// reader parses by count, never by scanning for a delimiter that the input itself may contain.
// Everything the generator wrote (bucket, message, repro, file names and contents) goes through
// printable(): a bundle printed on a terminal cannot drive it. Contents keep their tabs and lines
// and are not cut; only control characters change (to \xNN), and the exact bytes stay in the
// artifact directory.
import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { printable } from "../../core/log-lines.ts";
import { isoNow, type FailureState, type SweepStore } from "../../store/port.ts";
import { resolveStorePath } from "../generator/ingest.ts";
import type { KeptOut } from "../../files/output-file.ts";
import { checkCommand, laneArgs } from "../generator/command.ts";
import { effectiveFilters, failureTotals, oneLine, totalsLine } from "./failures.ts";

export interface ExportOptions {
  id: number | null;
  state: FailureState | "all";
  bucket: string | null;
  /** Implied by state 'stale'. */
  allGenerations: boolean;
  /** Include every artifact file, not only the minimized input and report.txt. */
  full: boolean;
  /** Lines shown per file section. */
  lines: number;
  outDir: string;
  appBuildNow: string | null;
  /** The [generator] check template, to print a ready-to-run check line, and the directory it runs in (the config's). */
  check: string[] | null;
  checkDir: string | null;
}

export interface ExportResult {
  text: string;
  failures: number;
  truncatedSections: number;
}

const RULE = "=".repeat(72);
/** The longest message, repro or check line shown. */
const TEXT_MAX_CHARS = 4000;
const SEEDS_SHOWN = 8;

/** Where a sweep's export never lands: the artifacts it is made from. */
export function sweepKeptOut(outDir: string): KeptOut[] {
  return [
    { dir: join(outDir, "failures"), what: "the failure artifacts" },
    { dir: join(outDir, "quarantine"), what: "the quarantine" },
  ];
}

export function exportBundle(store: SweepStore, o: ExportOptions): ExportResult | null {
  const gen = store.currentGeneration();
  if (!gen) return null;
  const filter = { id: o.id, state: o.state, bucket: o.bucket, generationId: effectiveFilters(o).allGenerations ? null : gen.id };
  // Finds pending minimization are no distinct failure: the bundle counts them by signature.
  const pending = o.id != null ? [] : store.pendingGroups(filter);
  const rows = store.listFailures(filter).sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : b.hits - a.hits || a.id - b.id));
  const out: string[] = [];
  let truncated = 0;
  out.push("fuzzfleet failure export");
  out.push(`  exported     ${isoNow()} from ${hostname()}`);
  out.push(`  generation   ${gen.id}  ${gen.gen_hash.slice(0, 12)}`);
  out.push(`  app build    ${o.appBuildNow ?? "none ([app] not configured)"}`);
  const bucketFilter = o.bucket ? `, bucket=${printable(o.bucket, { max: 64 })}` : "";
  out.push(`  failures     ${rows.length} distinct (${o.id != null ? `id ${o.id}` : `state=${o.state}${bucketFilter}`})`);
  out.push(`  totals       ${totalsLine(failureTotals(rows, pending))}`);
  out.push("");
  out.push("# Each failure carries its minimized input as text; control characters are shown as \\xNN.");
  out.push("# To reproduce, run its repro or check line.");
  out.push("# Parse file sections by their shown=N count (the next N lines are the file), never by scanning");
  out.push("# for a delimiter: the input itself may contain any text.");
  for (const f of rows) {
    // One more than shown tells whether there are more.
    const seeds = store.failureSeeds(f.id, SEEDS_SHOWN + 1);
    const dir = f.artifact_dir === null ? null : resolveStorePath(o.outDir, f.artifact_dir);
    out.push("");
    out.push(RULE);
    out.push(`===== FAILURE ${f.id}  ${printable(f.bucket, { max: 64 })}  lane=${printable(f.lane_name, { max: 64 })}  hits=${f.hits}  state=${f.state}`);
    out.push(`      signature   ${printable(f.signature ?? f.bucket, { max: TEXT_MAX_CHARS })}`);
    out.push(`      first seed  ${f.first_seed}`);
    out.push(`      message     ${printable(oneLine(f.message ?? ""), { max: TEXT_MAX_CHARS })}`);
    if (f.repro) out.push(`      repro       ${printable(f.repro, { max: TEXT_MAX_CHARS })}`);
    if (o.check) {
      // The check command runs in the config's directory: the line says so, so it can be pasted anywhere.
      const check = checkCommand(o.check, laneArgs(f.lane_params), [f.first_seed], 1).map(shellWord).join(" ");
      out.push(`      check       ${printable(o.checkDir ? `cd ${shellWord(o.checkDir)} && ${check}` : check, { max: TEXT_MAX_CHARS })}`);
    }
    out.push(`      app build   ${f.first_app_build ?? "none"}`);
    const shown = seeds.slice(0, SEEDS_SHOWN);
    out.push(`      seeds       ${shown.join(", ")}${seeds.length > shown.length ? " …" : ""}`);
    for (const name of sectionFiles(dir, o.full)) {
      const section = fileSection(dir!, name, o.lines);
      if (section.truncated) truncated++;
      out.push("");
      out.push(...section.lines);
    }
  }
  if (pending.length > 0) {
    out.push("");
    out.push(RULE);
    out.push(`===== PENDING MINIMIZATION  ${pending.length} signature(s): finds not minimized yet, not distinct failures`);
    for (const g of pending) {
      out.push(`      ${printable(g.bucket, { max: 64 })}  finds=${g.finds}  hits=${g.hits}  first seed ${g.first_seed}  state=${g.state}  ${printable(g.signature, { max: TEXT_MAX_CHARS })}`);
    }
  }
  out.push("");
  out.push(RULE);
  out.push(`end of export -- ${rows.length} failure(s)${truncated ? `, ${truncated} file section(s) truncated` : ""}`);
  return { text: out.join("\n") + "\n", failures: rows.length, truncatedSections: truncated };
}

/** The minimized input first, then report.txt, then (with full) every other regular file. */
function sectionFiles(dir: string | null, full: boolean): string[] {
  if (dir === null) return [];
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isFile())
      .map((d) => d.name)
      .sort();
  } catch {
    return [];
  }
  let keyName: string | undefined;
  try {
    const meta = JSON.parse(readFileSync(join(dir, "meta.json"), "utf8")) as { key_file?: unknown };
    if (typeof meta.key_file === "string" && names.includes(meta.key_file)) keyName = meta.key_file;
  } catch {
    // meta.json was validated at ingest; a later edit only loses the ordering hint.
  }
  keyName ??= names.find((n) => n.startsWith("input.min.")) ?? names.find((n) => n.startsWith("input."));
  const first = [keyName, "report.txt"].filter((n): n is string => n !== undefined && names.includes(n));
  const rest = full ? names.filter((n) => !first.includes(n)) : [];
  return [...first, ...rest];
}

function fileSection(dir: string, name: string, maxLines: number): { lines: string[]; truncated: boolean } {
  const path = join(dir, name);
  const shownName = printable(name, { max: 255 });
  let text: string;
  try {
    if (!lstatSync(path).isFile()) throw new Error("not a regular file");
    text = readFileSync(path).toString("utf8");
  } catch {
    return { lines: [`----- ${shownName}  [MISSING from the artifact directory]`], truncated: false };
  }
  const all = text.length === 0 ? [] : text.replace(/\n$/, "").split("\n");
  const shown = all.slice(0, maxLines).map((line) => printable(line, { max: Infinity, tabs: true }));
  const truncated = all.length > shown.length;
  return {
    lines: [`----- ${shownName}  shown=${shown.length} of ${all.length} lines${truncated ? "  TRUNCATED (raise --lines)" : ""}`, ...shown],
    truncated,
  };
}

/** A word a POSIX shell reads back as itself: quoted only when it must be. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}
