// The coordinator's side of a worker without the shared directory, apart from the wire (the
// sweep protocol, worker-protocol.ts, calls these): whether its own copy of the generator may
// serve, what its welcome tells it (results directory, caps), where a unit's files land, and the
// words for a worker's mode. The landing itself is unit-landing.ts.
import { isAbsolute, join, relative, sep } from "node:path";
import type { Config } from "../../config/schema.ts";
import { TRANSFER_DEFAULTS } from "../../config/schema.ts";
import { resultsDir } from "../generator/command.ts";
import { insideOf } from "../../config/identity.ts";
import { heldUnit, type ProveFrame, type TransferTermsT } from "../../net/messages.ts";
import type { SweepEngine, WorkerView } from "../engine/sweep-engine.ts";
import type { LandingPlace } from "./unit-landing.ts";
import type { ServedSession } from "./handshake.ts";

/** Why a worker without the shared directory is refused (its own copy is another generation or app build, or its results could not be sent), or null. */
export function ownCopyProblem(s: ServedSession, prove: ProveFrame): string | null {
  const where = "in the worker's working directory (it does not see the shared directory)";
  if (resultsBelowOut(s.config) === null) {
    return `[generator] results (${s.config.generator.results}) does not lie below {out}, so a worker without the shared directory cannot send its results; name a directory inside {out}, or mount the campaign directory on the worker`;
  }
  if (prove.gen_hash !== s.genHash) {
    return (
      `generator identity differs (worker ${prove.gen_hash?.slice(0, 12) ?? "unreadable"}, coordinator ${s.genHash.slice(0, 12)}): ` +
      `the copy of ${s.config.generator.identity.map((f) => (insideOf(s.config.dir, f) ? relative(s.config.dir, f) : f)).join(", ")} ${where} is not the coordinator's` +
      `${prove.problem ? ` (${prove.problem})` : ""}, so its seeds would mean different tests. Start the worker in a directory holding the same generator files.`
    );
  }
  if (prove.app_build !== s.appBuild) {
    return (
      `app build differs (worker ${prove.app_build ?? "unreadable"}, coordinator ${s.appBuild ?? "none"}): ` +
      `the worker's ${s.config.app ? (insideOf(s.config.dir, s.config.app.path) ? relative(s.config.dir, s.config.app.path) : s.config.app.path) : "app"} ${where} is another build${prove.problem ? ` (${prove.problem})` : ""}, so it would test different code. Copy the coordinator's build there.`
    );
  }
  return null;
}

/** What a worker without the shared directory is told in its welcome: where its results lie and the caps. */
export function transferTerms(config: Config, pieceBytes: number): TransferTermsT {
  const caps = config.distributed.transfer ?? TRANSFER_DEFAULTS;
  return { results: resultsBelowOut(config)!, max_files: caps.maxFiles, max_bytes: caps.maxBytes, max_file_bytes: caps.maxFileBytes, piece_bytes: pieceBytes };
}

/** Where a unit held by `w` under wire id `id` keeps its files here, or null when `w` does not hold it. */
export function landingPlace(engine: SweepEngine, config: Config, w: WorkerView, id: number): LandingPlace | null {
  const held = heldUnit(id);
  if (held.kind === "chunk") {
    const f = engine.heldBy(w).find((c) => c.chunkId === held.chunkId);
    if (!f) return null;
    const results = resultsBelowOut(config)!;
    const base = results === "" ? [] : results.split("/");
    return { dir: f.scratchDir, prefixes: [[...base, "failures"], [...base, "quarantine"]] };
  }
  const u = engine.minimize.heldBy(w).find((m) => m.unitId === held.unitId);
  // A minimize unit's results directory is its {out}; its quarantine is not read.
  return u ? { dir: u.scratchDir, prefixes: [["failures"]] } : null;
}

/** The results directory below a chunk's {out}, "/"-separated ("" for {out} itself), or null when it lies elsewhere. */
export function resultsBelowOut(config: Config): string | null {
  const out = join(config.dir, "out-probe");
  const rel = relative(out, resultsDir(config, out));
  if (rel === "") return "";
  if (rel === ".." || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return null;
  return rel.split(sep).join("/");
}

export { filesWords } from "../../core/worker-session.ts";
