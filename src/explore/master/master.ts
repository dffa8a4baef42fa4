// ExploreMaster: the frontier of one master. It admits inputs into the content-addressed corpus,
// claims the tasks it owns in the fenced lease table, hands them to executors (local slots or
// remote workers), and turns their results into commits: verify the stage, pass the commit fence,
// promote the children, complete, then claim the children it owns. It does no I/O on sockets and
// keeps no timers: the campaign runner (run.ts) drives it.
//
// A task: pending (hash, token) -> active on one executor -> committed | requeued (front, same
// fence) | dropped (fence lost). Only the current token of a hash may be dispatched, committed
// or completed; a late result under an old fence changes nothing.
//
// Inputs and stages are never followed through a symlink: the input directory is the one the
// campaign started with (its identity is checked on every scan) and its entries are read below
// a pin; a stage is reached from the staging root this master created (StagingArea).
import { readdirSync } from "node:fs";
import { printable } from "../../core/log-lines.ts";
import { owner as rendezvousOwner } from "../../core/rendezvous.ts";
import { PinnedDir, type DirIdentity, type EntryKind } from "../../files/pinned-dir.ts";
import type { ResultFrame, TaskItemT } from "../../net/messages.ts";
import { FileProblem, hashFile, IntegrityError, listRegularFiles, publishFile, STAGE_ID_RE, verifyPublic, type Budgets, type FileIdentity } from "../state/corpus.ts";
import { canonicalManifest, LeaseTable, type Origin } from "../state/lease-table.ts";
import { type OpenStage, promoteChildren, StagingArea, verifyStage } from "../state/staging.ts";
import { HEX64 } from "../../core/message-checks.ts";

export type Ownership = "rendezvous" | "broadcast";

export interface MasterOptions {
  corpusDir: string;
  inputDir: string;
  /** <work>/staging: executor stages live in <stagingRoot>/<executor key>/<staging id>. */
  stagingRoot: string;
  leases: LeaseTable;
  epoch: string;
  rank: number;
  ranks: number[];
  ownership: Ownership;
  budgets: Budgets;
  /** Per-run timeout in seconds, carried by every task. */
  timeoutSeconds: number;
  leaseTtlMs: number;
  /** Wall-clock ms (lease records compare across processes). */
  wallNow: () => number;
  log: (line: string) => void;
}

interface ActiveTask {
  taskId: number;
  hash: string;
  token: string;
  executor: string;
}

export interface MasterCounters {
  /** Results whose commit this master won. */
  observations: number;
  generated: number;
  /** Tasks recovered from expired leases (any master's). */
  recovered: number;
  replayedCommits: number;
  /** Results refused: bad fields, failed stage verification, wrong input hash, unowned. */
  invalidResults: number;
  /** Results under a fence that is no longer current. */
  staleResults: number;
  requeued: number;
  lostLeases: number;
  budgetErrors: number;
  integrityErrors: number;
  /** External inputs dropped into the input directory after this master froze discovery. */
  lateInputs: number;
  /** Input entries refused because they are symlinks or special files (each name counted once), and input directory replacements. */
  refusedInputs: number;
  /** Generated children this master claimed first (new to the campaign). */
  claimedChildren: number;
}

export class ExploreMaster {
  readonly counters: MasterCounters = {
    observations: 0,
    generated: 0,
    recovered: 0,
    replayedCommits: 0,
    invalidResults: 0,
    staleResults: 0,
    requeued: 0,
    lostLeases: 0,
    budgetErrors: 0,
    integrityErrors: 0,
    lateInputs: 0,
    refusedInputs: 0,
    claimedChildren: 0,
  };
  /** Content hashes seen in the input directory. */
  readonly external = new Set<string>();
  readonly quarantined = new Map<string, string>();
  /** Problems that make the campaign end non-zero (integrity, invalid results…), in order. */
  readonly problems: string[] = [];
  private readonly held = new Map<string, string>();
  private pending: { hash: string; token: string }[] = [];
  private readonly active = new Map<number, ActiveTask>();
  /** Corpus names already considered (claimed, or not ours to claim). */
  private readonly observed = new Set<string>();
  /** Public objects whose bytes this master verified or published itself. */
  private readonly verified = new Set<string>();
  private readonly inputSeen = new Map<string, string>();
  /** The input directory as the first scan found it: a later scan reads only that very directory. */
  private inputIdentity: DirIdentity | null = null;
  private inputReplaced = false;
  /** Input names refused (symlinks, special files) and already reported. */
  private readonly refusedInputNames = new Set<string>();
  private readonly staging: StagingArea;
  /** Listed input files still to be admitted, from inputBacklogNext on. */
  private inputBacklog: { name: string; identity: FileIdentity }[] = [];
  private inputBacklogNext = 0;
  private readonly ownerName: string;
  /** Broadcast ownership, or a single master: every hash is this master's, no owner hash needed. */
  private readonly everyoneOwns: boolean;
  private nextTaskId = 1;
  /** While frozen (a quiescence vote is pending), no new work is discovered. */
  frozen = false;

  constructor(private readonly o: MasterOptions) {
    this.staging = new StagingArea(o.stagingRoot);
    this.ownerName = `${o.epoch.slice(0, 16)}:${o.rank}`;
    this.everyoneOwns = o.ownership === "broadcast" || new Set(o.ranks).size === 1;
  }

  get idle(): boolean {
    return this.pending.length === 0 && this.active.size === 0 && this.inputBacklogCount === 0;
  }

  get pendingCount(): number {
    return this.pending.length;
  }

  /** Tasks handed out and not yet answered. */
  get activeCount(): number {
    return this.active.size;
  }

  /** The ids of the tasks `executor` holds. */
  activeOn(executor: string): number[] {
    const ids: number[] = [];
    for (const t of this.active.values()) if (t.executor === executor) ids.push(t.taskId);
    return ids;
  }

  /** Whether this master admits `hash` (rendezvous owner, or everyone under broadcast). */
  owns(hash: string): boolean {
    return this.everyoneOwns || rendezvousOwner(hash, this.o.ranks) === this.o.rank;
  }

  // ---- discovery --------------------------------------------------------------------------------

  /**
   * Scans the input directory: new or changed regular files are published and, if owned, claimed.
   * At most `limit` of them per call: the rest wait in a backlog that the next calls work through
   * (while it lasts the master is not idle), so that a large input directory is admitted while the
   * first tasks already run. The directory is listed again once the backlog is empty, and always
   * with no limit, which admits everything there is (a fresh rescan for the idle decision).
   */
  admitInputs(limit = Number.POSITIVE_INFINITY): number {
    if (this.frozen) return 0;
    const dir = this.openInputDir();
    if (dir === null) return 0;
    try {
      if (this.inputBacklog.length === 0 || limit === Number.POSITIVE_INFINITY) {
        let files: ReturnType<typeof listRegularFiles>;
        try {
          files = this.listInputs(dir);
        } catch (err) {
          this.problem(`cannot read the input directory ${this.o.inputDir}: ${(err as Error).message}`);
          return 0;
        }
        this.inputBacklog = files.filter((f) => this.inputSeen.get(f.name) !== identityKey(f.identity));
        this.inputBacklogNext = 0;
      }
      let added = 0;
      const stop = Math.min(this.inputBacklog.length, this.inputBacklogNext + limit);
      while (this.inputBacklogNext < stop) {
        if (this.admitInput(dir, this.inputBacklog[this.inputBacklogNext++])) added++;
      }
      if (this.inputBacklogNext >= this.inputBacklog.length) {
        this.inputBacklog = [];
        this.inputBacklogNext = 0;
      }
      return added;
    } finally {
      dir.close();
    }
  }

  /**
   * The input directory, pinned, if it is still the directory the first scan found (whatever
   * its path now leads to); null, reported once, while it is another one.
   */
  private openInputDir(): PinnedDir | null {
    let dir: PinnedDir;
    try {
      dir = PinnedDir.open(this.o.inputDir);
    } catch (err) {
      this.problem(`cannot read the input directory ${this.o.inputDir}: ${(err as Error).message}`);
      return null;
    }
    const now = dir.identity();
    this.inputIdentity ??= now;
    if (now.dev === this.inputIdentity.dev && now.ino === this.inputIdentity.ino) {
      this.inputReplaced = false;
      return dir;
    }
    dir.close();
    if (!this.inputReplaced) {
      this.inputReplaced = true;
      this.counters.refusedInputs++;
      this.problem(
        `the input directory ${this.o.inputDir} was replaced since the campaign started (it now leads to another directory); nothing is read from it until the original is back: restore it, or start a new campaign on the new directory`,
      );
    }
    return null;
  }

  /** Regular files of the input directory; a symlink or special file is reported once by name and never followed. */
  private listInputs(dir: PinnedDir): ReturnType<typeof listRegularFiles> {
    const refusedNow = new Set<string>();
    const files = listRegularFiles(dir, (name, kind) => {
      refusedNow.add(name);
      if (this.refusedInputNames.has(name)) return;
      this.refusedInputNames.add(name);
      this.counters.refusedInputs++;
      this.o.log(`input ${name} is ${refusedKind(kind)}: refused, never followed; put the file itself into ${this.o.inputDir}`);
    });
    // A name that is no longer refused is reported again if it turns into a symlink once more.
    for (const name of this.refusedInputNames) if (!refusedNow.has(name)) this.refusedInputNames.delete(name);
    return files;
  }

  /** Input files listed and not yet looked at. */
  get inputBacklogCount(): number {
    return this.inputBacklog.length - this.inputBacklogNext;
  }

  /** One listed file that inputSeen did not know in this form (the listing filtered it). */
  private admitInput(dir: PinnedDir, f: { name: string; identity: FileIdentity }): boolean {
    const key = identityKey(f.identity);
    // Read below the pin: a name replaced by a symlink since the listing is refused, not followed.
    const path = dir.entry(f.name);
    // With several owners an input is hashed first: only its owner publishes and admits it.
    if (!this.everyoneOwns) {
      let hash: string;
      try {
        hash = hashFile(path, this.o.budgets.maxInputBytes).hash;
      } catch (err) {
        this.unreadableInput(f.name, key, err);
        return false;
      }
      this.external.add(hash);
      if (!this.owns(hash)) {
        // Another master admits it; this one only remembers that it saw it.
        this.inputSeen.set(f.name, key);
        return false;
      }
    }
    let published: { hash: string };
    try {
      // Not fsynced: the input directory stays the source, and a rescan republishes a lost copy.
      published = publishFile(this.o.corpusDir, path, this.o.budgets.maxInputBytes, undefined, false);
    } catch (err) {
      if (err instanceof IntegrityError) {
        this.integrity(err.message);
        this.inputSeen.set(f.name, key);
      } else {
        this.unreadableInput(f.name, key, err);
      }
      return false;
    }
    this.inputSeen.set(f.name, key);
    this.external.add(published.hash);
    this.verified.add(published.hash);
    this.observed.add(published.hash);
    return this.claim(published.hash, "initial");
  }

  private unreadableInput(name: string, key: string, err: unknown): void {
    if (err instanceof FileProblem && err.problem === "too-large") {
      this.o.log(`input ${name} is larger than the input budget (${err.observed} > ${err.limit} bytes): skipped`);
      this.inputSeen.set(name, key);
    }
    // Unreadable or changing while read: not remembered, so the next scan retries it.
  }

  /** Scans the public corpus for objects this master owns and has not considered yet. */
  scanCorpus(): number {
    if (this.frozen) return 0;
    let added = 0;
    let names: string[];
    try {
      names = readdirSync(this.o.corpusDir);
    } catch (err) {
      this.problem(`cannot read the corpus directory ${this.o.corpusDir}: ${(err as Error).message}`);
      return 0;
    }
    for (const hash of names) {
      if (!HEX64.test(hash) || this.observed.has(hash)) continue;
      // Ownership never changes during a campaign: another master's object is looked at once.
      this.observed.add(hash);
      if (!this.owns(hash)) continue;
      try {
        verifyPublic(this.o.corpusDir, hash, this.o.budgets.maxInputBytes);
      } catch (err) {
        if (err instanceof IntegrityError) this.integrity(err.message);
        // A file that changed or could not be read is looked at again by the next scan; a
        // symlink or a directory named like a hash is never accepted.
        else if (!(err instanceof FileProblem) || !["symlink", "not-regular", "too-large"].includes(err.problem)) this.observed.delete(hash);
        continue;
      }
      if (this.claim(hash, this.external.has(hash) ? "initial" : "generated")) added++;
    }
    return added;
  }

  /** Takes over expired `leased` records (any master's: progress when an owner stalls). */
  recoverExpired(ttlMs = this.o.leaseTtlMs): number {
    if (this.frozen) return 0;
    let added = 0;
    for (const r of this.o.leases.recoverExpired(this.o.wallNow(), ttlMs)) {
      if (this.held.has(r.id)) continue;
      const token = this.o.leases.claim(r.id, r.payload, this.ownerName, { now: this.o.wallNow(), ttlMs, worker: this.o.rank });
      if (!token) continue;
      try {
        verifyPublic(this.o.corpusDir, r.id, this.o.budgets.maxInputBytes);
      } catch (err) {
        if (err instanceof IntegrityError) {
          this.integrity(err.message);
        } else {
          // The corpus file is gone: nothing can execute it; release the record at once.
          this.o.leases.abandon(r.id, token);
          this.o.log(`recovered task ${r.id.slice(0, 12)} has no corpus file: abandoned`);
        }
        continue;
      }
      this.observed.add(r.id);
      this.held.set(r.id, token);
      this.pending.push({ hash: r.id, token });
      this.counters.recovered++;
      added++;
    }
    return added;
  }

  /** Redoes commits that passed their fence but were not finished (a crashed master's). */
  replayCommitting(): number {
    let n = 0;
    for (const c of this.o.leases.recoverCommitting()) {
      let stage: OpenStage | null = null;
      try {
        stage = c.commit.staging_id === "" ? null : this.staging.open(c.commit.worker, c.commit.staging_id);
      } catch (err) {
        // Gone (promoted, then removed) or refused (a symlink): only public children can complete it.
        if (!(err instanceof FileProblem)) throw err;
      }
      try {
        const r = this.o.leases.replayCommit(
          c.id,
          c.fence,
          (m) => promoteChildren(stage?.dir ?? null, this.o.corpusDir, m.hashes, this.o.budgets.maxInputBytes),
          this.o.wallNow(),
        );
        if (r === "completed") {
          n++;
          this.counters.replayedCommits++;
          stage?.remove();
          for (const child of c.commit.hashes) this.claimChild(child);
        }
      } finally {
        stage?.close();
      }
    }
    return n;
  }

  /** Everything a quiescence refresh looks at: inputs, the corpus, expired leases. Returns whether work appeared. */
  refresh(): boolean {
    const before = this.pending.length;
    this.admitInputs();
    this.scanCorpus();
    this.recoverExpired();
    return this.pending.length > before;
  }

  /** Input files this master owns but never admitted (discovery was frozen): left for the next campaign. */
  countLateInputs(): number {
    let late = 0;
    const dir = this.openInputDir();
    if (dir === null) return 0;
    try {
      for (const f of listRegularFiles(dir)) {
        if (this.inputSeen.get(f.name) === identityKey(f.identity)) continue;
        try {
          if (this.owns(hashFile(dir.entry(f.name), this.o.budgets.maxInputBytes).hash)) late++;
        } catch {
          // Unreadable now: it will be looked at by the next campaign anyway.
        }
      }
    } catch {
      return 0;
    } finally {
      dir.close();
    }
    this.counters.lateInputs = late;
    return late;
  }

  /** Renews every held token (one batch); lost ones are dropped. */
  heartbeat(): void {
    if (this.held.size === 0) return;
    const { lost } = this.o.leases.heartbeatMany(this.held, this.o.wallNow());
    for (const id of lost) {
      this.held.delete(id);
      this.counters.lostLeases++;
    }
    if (lost.length) this.pending = this.pending.filter((p) => this.held.get(p.hash) === p.token);
  }

  private claim(hash: string, origin: Origin): boolean {
    if (!this.owns(hash) || this.held.has(hash)) return false;
    const token = this.o.leases.claim(hash, { hash, origin }, this.ownerName, {
      now: this.o.wallNow(),
      ttlMs: this.o.leaseTtlMs,
      worker: this.o.rank,
    });
    if (!token) return false;
    this.held.set(hash, token);
    this.pending.push({ hash, token });
    if (origin === "generated") this.counters.claimedChildren++;
    return true;
  }

  private claimChild(hash: string): void {
    this.verified.add(hash);
    // Most children are duplicates of inputs already considered: no lease read for those.
    if (this.observed.has(hash)) return;
    this.observed.add(hash);
    this.claim(hash, this.external.has(hash) ? "initial" : "generated");
  }

  // ---- dispatch ---------------------------------------------------------------------------------

  /** The next task for `executor`, if it may work and there is one under a current fence. */
  nextTask(executor: string): TaskItemT | null {
    if (this.quarantined.has(executor)) return null;
    while (this.pending.length > 0) {
      const p = this.pending.shift()!;
      if (this.held.get(p.hash) !== p.token) continue;
      const taskId = this.nextTaskId++;
      this.active.set(taskId, { taskId, hash: p.hash, token: p.token, executor });
      return { task_id: taskId, hash: p.hash, fence: p.token, timeout: this.o.timeoutSeconds };
    }
    return null;
  }

  /** The executor is gone or interrupted: its tasks go back to the front under the same fence. */
  release(executor: string): number {
    let n = 0;
    for (const [id, t] of this.active) {
      if (t.executor !== executor) continue;
      this.active.delete(id);
      if (this.requeueFront(t)) n++;
    }
    return n;
  }

  private requeueFront(t: { hash: string; token: string }): boolean {
    if (this.held.get(t.hash) !== t.token) {
      this.counters.staleResults++;
      return false;
    }
    this.pending.unshift({ hash: t.hash, token: t.token });
    this.counters.requeued++;
    return true;
  }

  // ---- results ----------------------------------------------------------------------------------

  /** Where an executor's stages live: derived from the executor key the master chose, never from the worker. */
  stageRoot(executor: string): string {
    return this.staging.executorRoot(executor);
  }

  /**
   * Consumes one result (also during shutdown: late results are never dropped). Returns the note
   * for the worker's ack.
   */
  consumeResult(executor: string, r: ResultFrame): string {
    const stageId = STAGE_ID_RE.test(r.staging_id) ? r.staging_id : null;
    // Before the stage is opened it is removed through a fresh walk, after that through its pin.
    let stage: OpenStage | null = null;
    const removeStage = () => {
      if (stage) stage.remove();
      else if (stageId) this.staging.remove(executor, stageId);
    };
    const task = this.active.get(r.task_id);
    if (!task || task.executor !== executor) {
      removeStage();
      this.invalid(executor, `result for task ${r.task_id}, which it does not hold`);
      return "unknown task";
    }
    this.active.delete(r.task_id);
    if (r.protocol_error === "interrupted") {
      removeStage();
      this.requeueFront(task);
      return "requeued";
    }
    if (r.protocol_error === "result-budget-exceeded" || r.protocol_error === "input-budget-exceeded") {
      removeStage();
      return this.budgetFailure(task, r);
    }
    const why = this.resultProblem(task, r);
    if (why !== null) return this.refuseResult(executor, task, why, removeStage);
    if (stageId) {
      try {
        stage = this.staging.open(executor, stageId);
      } catch (err) {
        if (!(err instanceof FileProblem)) throw err;
        return this.refuseResult(executor, task, `stage ${stageId}: ${err.message}`, removeStage);
      }
    }
    try {
      if (stage) {
        const verdict = verifyStage(stage.dir, r.new_hashes, r.staged_bytes, this.o.budgets.maxInputBytes);
        if (!verdict.ok) return this.refuseResult(executor, task, `stage ${stageId}: ${verdict.reason}`, removeStage);
      }
      return this.commit(executor, task, r, stage?.dir ?? null, removeStage);
    } finally {
      stage?.close();
    }
  }

  /** Strict checks of a result against the task it answers (concolic-spec §7.4). */
  private resultProblem(task: ActiveTask, r: ResultFrame): string | null {
    if (r.fence !== task.token) return "the fence does not match the task's";
    if (r.protocol_error !== "") return `the worker reported ${r.protocol_error}${r.detail ? `: ${printable(r.detail, { max: 500 })}` : ""}`;
    if (r.input_hash !== task.hash) return `input hash ${r.input_hash ?? "(none)"} is not the assigned ${task.hash}`;
    if (r.new_hashes.length > this.o.budgets.maxChildren) return `${r.new_hashes.length} children exceed the budget of ${this.o.budgets.maxChildren}`;
    if (r.num_generated !== r.new_hashes.length) return `num_generated ${r.num_generated} differs from the ${r.new_hashes.length} hashes reported`;
    if (r.new_hashes.length === 0 && (r.staging_id !== "" || r.staged_bytes !== 0)) return "a stage without children";
    if (r.new_hashes.length > 0 && !STAGE_ID_RE.test(r.staging_id)) return "children without a stage id";
    if (r.staged_bytes > this.o.budgets.maxResultBytes) return `${r.staged_bytes} staged bytes exceed the budget of ${this.o.budgets.maxResultBytes}`;
    if (!r.new_hashes.every((h) => HEX64.test(h))) return "a child hash is not 64 lowercase hex";
    return null;
  }

  private refuseResult(executor: string, task: ActiveTask, why: string, removeStage: () => void): string {
    removeStage();
    this.invalid(executor, why);
    // The content itself must still be what its name says, or nobody can execute it.
    try {
      verifyPublic(this.o.corpusDir, task.hash, this.o.budgets.maxInputBytes);
    } catch (err) {
      if (err instanceof IntegrityError) {
        this.integrity(err.message);
        this.dropFence(task);
        return "refused";
      }
    }
    this.requeueFront(task);
    return "refused";
  }

  private budgetFailure(task: ActiveTask, r: ResultFrame): string {
    this.counters.budgetErrors++;
    const b = r.budget;
    this.problems.push(
      `task ${task.hash.slice(0, 12)}: ${r.protocol_error}${b ? ` (${b.resource}: ${b.observed} > ${b.limit})` : ""}; it is completed without children`,
    );
    // A budget error is a property of the input, not of the worker: retrying would fail again.
    const manifest = canonicalManifest({ worker: "budget", staging_id: "", hashes: [], num_generated: 0 });
    if (this.o.leases.beginCommit(task.hash, task.token, manifest, this.o.wallNow())) {
      this.o.leases.complete(task.hash, task.token, this.o.wallNow());
    }
    this.held.delete(task.hash);
    return "budget exceeded";
  }

  private commit(executor: string, task: ActiveTask, r: ResultFrame, stage: PinnedDir | null, removeStage: () => void): string {
    const now = this.o.wallNow();
    const manifest = canonicalManifest({ worker: executor, staging_id: r.staging_id, hashes: r.new_hashes, num_generated: r.num_generated });
    if (manifest.hashes.length === 0) {
      const outcome = this.o.leases.commitEmpty(task.hash, task.token, manifest, now);
      removeStage();
      this.held.delete(task.hash);
      if (outcome !== "completed") {
        this.counters.staleResults++;
        return outcome;
      }
      this.counters.observations++;
      return "committed";
    }
    if (!this.o.leases.beginCommit(task.hash, task.token, manifest, now)) {
      removeStage();
      this.counters.staleResults++;
      this.held.delete(task.hash);
      return "stale";
    }
    let outcome: "completed" | "already" | "stale";
    try {
      outcome = this.o.leases.replayCommit(
        task.hash,
        task.token,
        (m) => {
          if (stage) promoteChildren(stage, this.o.corpusDir, m.hashes, this.o.budgets.maxInputBytes, (h) => this.verified.has(h));
        },
        this.o.wallNow(),
      );
    } catch (err) {
      // The record stays `committing`: any master (or --resume) redoes it from the manifest.
      this.problem(`promoting the children of ${task.hash.slice(0, 12)} failed: ${(err as Error).message}`);
      this.held.delete(task.hash);
      return "commit deferred";
    }
    removeStage();
    this.held.delete(task.hash);
    if (outcome !== "completed") {
      this.counters.staleResults++;
      return outcome;
    }
    this.counters.observations++;
    this.counters.generated += r.num_generated;
    for (const child of manifest.hashes) this.claimChild(child);
    return "committed";
  }

  private dropFence(task: { hash: string }): void {
    this.held.delete(task.hash);
    this.pending = this.pending.filter((p) => p.hash !== task.hash);
  }

  private invalid(executor: string, why: string): void {
    this.counters.invalidResults++;
    this.problems.push(`invalid result from ${executor}: ${why}`);
    if (!this.quarantined.has(executor)) {
      this.quarantined.set(executor, why);
      this.o.log(`executor ${executor} quarantined: ${printable(why)}`);
    }
  }

  private integrity(message: string): void {
    this.counters.integrityErrors++;
    this.problems.push(message);
    this.o.log(message);
  }

  private problem(message: string): void {
    this.problems.push(message);
    this.o.log(message);
  }
}

function refusedKind(kind: Exclude<EntryKind, "file" | "directory">): string {
  return kind === "symlink" ? "a symbolic link" : "not a regular file (a FIFO, socket or device)";
}

function identityKey(i: FileIdentity): string {
  return `${i.dev}:${i.ino}:${i.size}:${i.mtimeMs}:${i.ctimeMs}`;
}
