// A long explore campaign's corpus, forged quickly: what a finished campaign leaves beside its
// corpus after a million executions, written in the layout the code reads (state/corpus.ts,
// ledger.ts, findings.ts, command/history.ts):
//
//   <corpus>/<sha256>                          every object a hard link to one empty file (the views never re-hash)
//   <corpus>/.fuzzfleet/explored/<epoch>-r0.log one line per execution: "<hash> <build>"
//   <corpus>/.fuzzfleet/findings/<hash>.json   one record per finding input, grouped into signatures
//   <corpus>/.fuzzfleet/history/<epoch>-r0.json the master's bounded growth history
//
// Object i's name is a hash of i, so the test can say which objects are which without listing.
import { createHash } from "node:crypto";
import { closeSync, linkSync, mkdirSync, openSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";

export interface LongExplore {
  /** Corpus objects, every one executed once (one ledger line each). */
  entries: number;
  /** Finding inputs (the first `findings` objects); signature j of `signatures` holds inputs i with i % signatures === j, except `singletons` of them hold one input only. */
  findings: number;
  signatures: number;
  /** Signatures found by exactly one input (the last ones); the others are spread over the remaining inputs. */
  singletons: number;
  /** Points of the growth history (at most the 600 a master keeps). */
  historyPoints?: number;
}

export interface LongExploreFacts {
  epoch: string;
  build: string;
  executions: number;
  generated: number;
  unique: number;
  /** Inputs under each signature, by signature. */
  incidences: Map<string, number>;
}

const LINKS = 60_000;

export const FORGED_BUILD = "0123456789ab";

export function objectHash(i: number): string {
  return createHash("sha256").update(`object ${i}`).digest("hex");
}

export function forgeLongExplore(corpus: string, o: LongExplore): LongExploreFacts {
  const epoch = createHash("sha256").update("long explore epoch").digest("hex");
  const state = join(corpus, ".fuzzfleet");
  for (const d of [corpus, state, join(state, "explored"), join(state, "findings"), join(state, "history")]) mkdirSync(d, { recursive: true, mode: 0o700 });
  // A file takes at most 65,000 links (ext4): a fresh empty file every LINKS objects.
  const blankOf = (i: number) => join(state, `blank-${Math.floor(i / LINKS)}`);
  const ledger = openSync(join(state, "explored", `${epoch}-r0.log`), "w", 0o600);
  const lines: string[] = [];
  const flush = () => {
    writeSync(ledger, lines.join(""));
    lines.length = 0;
  };
  for (let i = 0; i < o.entries; i++) {
    const h = objectHash(i);
    if (i % LINKS === 0) writeFileSync(blankOf(i), "");
    linkSync(blankOf(i), join(corpus, h));
    lines.push(`${h} ${FORGED_BUILD}\n`);
    if (lines.length >= 10_000) flush();
  }
  flush();
  closeSync(ledger);

  // Signatures: the last `singletons` hold one input each; the rest share the other inputs round-robin.
  const shared = o.signatures - o.singletons;
  if (shared < 1 || o.findings - o.singletons < shared) throw new Error("every shared signature needs an input");
  const incidences = new Map<string, number>();
  const t0 = Date.parse("2026-01-05T00:00:00Z");
  for (let i = 0; i < o.findings; i++) {
    const j = i < o.findings - o.singletons ? i % shared : shared + (i - (o.findings - o.singletons));
    const signature = `signal 11 | crash in function_${j}`;
    incidences.set(signature, (incidences.get(signature) ?? 0) + 1);
    const at = new Date(t0 + i * 1000).toISOString();
    const h = objectHash(i);
    const record = {
      schema: "fuzzfleet-finding-v1",
      input_hash: h,
      kind: "crash",
      signal: 11,
      exit_code: null,
      stderr_tail: `crash in function_${j}\n`,
      signature,
      first_seen: at,
      last_seen: at,
      times_seen: 1,
      fences: [`${epoch.slice(0, 16)}:0:4242:${i.toString(16).padStart(16, "0")}`],
      first_build: FORGED_BUILD,
      last_build: FORGED_BUILD,
      not_reproduced_by: null,
    };
    writeFileSync(join(state, "findings", `${h}.json`), JSON.stringify(record) + "\n", { mode: 0o600 });
  }

  // The history the master kept: cumulative counters from nothing to the end, `points` of them.
  const generated = 3 * o.entries;
  const unique = o.entries - 1;
  const n = Math.min(600, o.historyPoints ?? 600);
  const points: [number, number, number, number][] = [];
  for (let k = 1; k <= n; k++) points.push([t0 / 1000 + k * 60, Math.round((o.entries * k) / n), Math.round((generated * k) / n), Math.round((unique * k) / n)]);
  writeFileSync(join(state, "history", `${epoch}-r0.json`), JSON.stringify({ schema: "fuzzfleet-explore-history-v1", epoch, rank: 0, points, corpus: o.entries }) + "\n", { mode: 0o600 });
  return { epoch, build: FORGED_BUILD, executions: o.entries, generated, unique, incidences };
}
