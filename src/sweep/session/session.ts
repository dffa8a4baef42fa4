// Opening and closing a sweep session, shared by `run` (local executor) and `coordinate`
// (remote workers). Order: config, budget and app checks first (a bad config never takes the
// lock), then the lock, then the store: sessions a dead process left 'running' are marked
// crashed and the scratch directories it left under <out>/tmp/ are removed before anything else;
// everything opened is closed again on any failure.
import { mkdirSync, readdirSync } from "node:fs";
import { removeBelow } from "../../files/pinned-dir.ts";
import { hostname } from "node:os";
import { join } from "node:path";
import { formatDuration } from "../../config/duration.ts";
import { formatInt } from "../../config/format.ts";
import { loadConfig, type Config } from "../../config/load.ts";
import { deadlineFloor } from "../../core/schedule.ts";
import { RefusedError, UsageError } from "../../errors.ts";
import { CampaignLock, type LockCommand } from "../../lock/campaign-lock.ts";
import type { SessionEnd, SessionStore, StoreDurability, SweepStore } from "../../store/port.ts";
import { openSessionStore } from "../../store/sqlite/index.ts";
import { LAST_SEED, SEED_LIMIT } from "../../core/ranges.ts";
import type { EngineLane } from "../engine/sweep-engine.ts";
import { clock } from "../../config/format.ts";
import { ensureGeneration, recoverLanes, selectLanes, syncLanes, type Confirm } from "./campaign.ts";
import { appBuildId, generationHash, staleAppSource } from "../../config/identity.ts";
import type { CampaignPaths } from "../../config/paths.ts";

export interface OpenSessionOptions {
  paths: CampaignPaths;
  command: LockCommand & ("run" | "coordinate");
  requestedSeconds: number;
  laneNames: string[];
  allowStaleApp: boolean;
  forceUnlock: boolean;
  confirm: Confirm;
  log: (line: string) => void;
  port?: number | null;
}

export interface SweepSession {
  config: Config;
  store: SessionStore;
  lock: CampaignLock;
  outDir: string;
  genHash: string;
  appBuild: string | null;
  generationId: number;
  freshGeneration: boolean;
  sessionId: number;
  lanes: EngineLane[];
  lastCounts: Map<string, number | null>;
  uncovered: Map<string, number>;
  /** Non-null where commits are made durable off the event loop (the session's CommitQueue waits for it). */
  durability: StoreDurability | null;
  log: (line: string) => void;
}

export async function openSweepSession(o: OpenSessionOptions): Promise<SweepSession> {
  const config = loadConfig(o.paths.configPath);
  checkBudget(o.requestedSeconds, config);
  const selected = selectLanes(config, o.laneNames);
  if (!selected.some((l) => l.enabled)) {
    throw new RefusedError(`no enabled lanes in ${config.path} — enable one, or name lanes with --lane NAME`);
  }
  const appBuild = appBuildId(config);
  if (!o.allowStaleApp) {
    const stale = staleAppSource(config);
    if (stale) {
      throw new RefusedError(
        `the app ${config.app!.path} is older than its source ${stale.file} ` +
          `(${stale.appMtime.toISOString()} < ${stale.sourceMtime.toISOString()}): a long sweep of a stale build tests the wrong code. ` +
          "Rebuild the app, or pass --allow-stale-app if that is what you want.",
      );
    }
  }
  const genHash = generationHash(config);
  const outDir = o.paths.outDir;
  const lock = CampaignLock.acquire(outDir, { command: o.command, port: o.port ?? null, forceUnlock: o.forceUnlock, log: o.log });
  let store: SessionStore | null = null;
  try {
    store = openSessionStore(o.paths.dbPath, { journal: config.store.journal, log: o.log });
    recordCrashes(store, o.log);
    repairSeedRanges(store, o.log);
    removeLeftovers(outDir, o.log);
    const { generation, fresh } = await ensureGeneration(store, genHash, o.confirm, o.log);
    const rows = await syncLanes(store, generation.id, config, o.confirm, o.log);
    mkdirSync(join(outDir, "failures"), { recursive: true });
    mkdirSync(join(outDir, "tmp"), { recursive: true });
    const recovered = recoverLanes(store, selected, rows);
    const sessionId = store.startSession({
      generationId: generation.id,
      requestedSeconds: o.requestedSeconds,
      appBuild,
      transport: o.command === "run" ? "local" : "distributed",
      host: hostname(),
      port: o.port ?? null,
    });
    return {
      config,
      store,
      lock,
      outDir,
      genHash,
      appBuild,
      generationId: generation.id,
      freshGeneration: fresh,
      sessionId,
      lanes: recovered.lanes,
      lastCounts: recovered.lastCounts,
      uncovered: recovered.uncovered,
      durability: store.deferDurability(),
      log: o.log,
    };
  } catch (err) {
    store?.close();
    lock.release();
    throw err;
  }
}

/** No chunk starts once less than the deadline floor remains, so a budget within it would run nothing. */
function checkBudget(seconds: number, config: Config): void {
  const floor = deadlineFloor(config.defaults.chunkSeconds);
  if (seconds <= floor) {
    throw new UsageError(
      `--for ${formatDuration(seconds)} leaves no time for a chunk: none starts with less than ${formatDuration(floor)} left; ` +
        `ask for --for ${formatDuration(floor + 1)} or more`,
    );
  }
}

/**
 * Sessions still 'running' belong to a process that died (we hold the lock): mark them crashed
 * and their chunks in flight aborted:lost. Recovery re-sweeps those ranges like any other
 * non-complete chunk.
 */
function recordCrashes(store: SweepStore, log: (line: string) => void): void {
  let crashed: number[] = [];
  let lost = 0;
  let released = 0;
  store.transaction(() => {
    crashed = store.markCrashedSessions();
    lost = store.abortLostChunks();
    released = store.releaseLostUnits();
  });
  if (released > 0) log(`${released} find(s) a minimize unit held when its process died wait for minimization again`);
  if (crashed.length === 0 && lost === 0) return;
  const which = crashed.length === 0 ? "" : `session(s) ${crashed.map((id) => `#${id}`).join(", ")} ended without closing (the process died): marked crashed`;
  const chunks = lost === 0 ? "" : `${lost} chunk(s) left in flight marked aborted:lost; their seeds are queued to be swept again`;
  log([which, chunks].filter((x) => x !== "").join("; "));
}

/**
 * A store written before seeds were bounded may hold chunk ranges past the last exact seed (or
 * cursors past the limit), which no lane can be rebuilt from: repaired here, in one line.
 */
function repairSeedRanges(store: SweepStore, log: (line: string) => void): void {
  const chunks = store.repairChunkRanges(LAST_SEED);
  const lanes = store.repairLaneCursors(SEED_LIMIT);
  if (chunks.length > 0) {
    const first = chunks[0]!;
    const more = chunks.length > 1 ? ` and ${chunks.length - 1} more` : "";
    log(
      `repaired ${chunks.length} chunk row(s) whose seed range went past the last exact seed ${formatInt(LAST_SEED)}: ` +
        `chunk ${first.chunkId} of lane '${first.laneName}' (seeds ${formatInt(first.seedFrom)}..${formatInt(first.seedTo)}, ${first.status})${more} ` +
        `is now aborted:invalid range and its seeds up to the limit are swept again; coverage below it is kept`,
    );
  }
  if (lanes.length > 0) {
    log(`repaired the cursor of lane(s) ${lanes.map((l) => `'${l.name}'`).join(", ")}: it lay past ${formatInt(SEED_LIMIT)}, one past the last exact seed, and now ends there`);
  }
}

/**
 * Scratch directories of chunks (`tmp/chunk-N`) and nonce files that a session which died left
 * behind. We hold the lock, so no live session owns them; chunk logs stay (an aborted chunk's log
 * is kept on purpose). A symlink planted there is removed, never followed.
 */
function removeLeftovers(outDir: string, log: (line: string) => void): void {
  const tmp = join(outDir, "tmp");
  let names: string[];
  try {
    names = readdirSync(tmp);
  } catch {
    return;
  }
  let removed = 0;
  for (const name of names) {
    if (!/^(chunk|minimize|nonce)-\d+$/.test(name)) continue;
    try {
      if (removeBelow(outDir, join("tmp", name))) removed++;
    } catch (err) {
      log(`could not remove ${join(tmp, name)} left by an earlier session: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  if (removed > 0) log(`removed ${removed} scratch entr${removed === 1 ? "y" : "ies"} an earlier session left in ${tmp}`);
}

/**
 * Records the end of the session and lets go of the store and the lock. A store that refuses the
 * write costs nothing but the end time: the row stays 'running' and the next start marks it
 * crashed.
 */
export async function closeSweepSession(s: SweepSession, status: SessionEnd): Promise<void> {
  try {
    // The session's last write is durable when it returns.
    await s.store.settle();
    s.store.endSession(s.sessionId, status);
  } catch (err) {
    s.log(`could not record the end of session ${s.sessionId} (${(err as Error).message}); the next start marks it crashed — nothing else is lost`);
  } finally {
    s.store.close();
    s.lock.release();
  }
}

/**
 * The opening lines of a session's banner, `run` and `coordinate` alike: the session and
 * generation, and the seeds an earlier session left uncovered (swept first). `suffix` ends the
 * first line.
 */
export function sessionHeadLines(s: SweepSession, command: string, suffix = ""): string[] {
  const lines = [
    `fuzzfleet ${command}: session ${s.sessionId}, generation ${s.generationId} (${s.genHash.slice(0, 12)})${s.appBuild ? `, app ${s.appBuild}` : ""}${suffix}`,
  ];
  if (s.freshGeneration) lines.push("         new generation — all lanes start at base_seed");
  const enabled = new Set(s.lanes.filter((l) => l.config.enabled).map((l) => l.config.name));
  for (const [lane, n] of s.uncovered) {
    if (enabled.has(lane)) lines.push(`         ${lane}: ${formatInt(n)} seed(s) left uncovered by an earlier session — re-sweeping them first`);
  }
  return lines;
}

/** The budget lines of a session's banner: budget, chunk length, enabled lanes, end time. */
export function sessionBudgetLines(s: SweepSession, seconds: number): string[] {
  const lanes = s.lanes
    .filter((l) => l.config.enabled)
    .map((l) => `${l.config.name}(w${l.config.weight})`)
    .join(", ");
  return [
    `         ${formatDuration(seconds)} budget, ~${formatDuration(s.config.defaults.chunkSeconds)} chunks, lanes: ${lanes}`,
    `         ends at ${clock(new Date(Date.now() + seconds * 1000))}`,
  ];
}
