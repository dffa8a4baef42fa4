// A deterministic simulation of the lease table under faults: a seeded scheduler drives several
// simulated masters that claim, heartbeat, execute, pass the commit fence, publish and complete
// the contents of a small corpus through the real LeaseTable, over one of its stores:
//
//   memory         lease-store/memory.ts: one simulated disk, each master its own store over it
//   shared-files   lease-store/shared-files.ts in a temporary directory, each master its own table
//   journal        lease-store/journal.ts: one process owns the table; the masters are its holders
//   partitioned    lease-store/partitioned.ts in a temporary directory: each master serves its
//                  share under a partition lease; a crashed or stalled master's share is taken
//                  over by another once its lease expired (the stall stands for a file system that
//                  drops a stalled holder's lock with its lease, NFSv4's: the generation check is
//                  then the only fence), its leased records run again, its commits replayed;
//                  with `staleReadsMs`, the masters read the partition records as clients of a
//                  shared file system whose reads without the short lock may be answered from
//                  the client's copy up to that old (lease-world-stores.ts PartitionClients)
//
// Faults, while they last: a master crashes (its memory dropped, its table reopened: a journal is
// absorbed by the reopening); a master stalls past the lease and wakes with its old fences;
// results are delayed, duplicated and reordered on their way to the master; a write or a sync
// fails (memory: EIO on put or sync; shared files: EIO on a directory fsync); a journal's last
// line is torn by a crash in the middle of its write; the power is cut (memory: only what was
// synced is left). Then the faults stop and the world runs until every content is done.
//
// Checked after every step, on what the step touched (a step that reopens a table: on every
// record): each content is committed under one fence at most; a transition under a stale fence
// is refused and changes nothing; a `committing` or `done` record keeps its fence (never stolen)
// and a claim never takes one; no child is published before its parent's fence is durable
// (memory); a power cut keeps every fence whose children were published. At the end every content
// is done, committed exactly once. Partitioned: no share is taken over while its holder's lease is
// live, and the fleet counts as quiescent (core/quiescence.ts sharesIdle, on the shares as a master
// reads them) only when nothing is left anywhere, and no master claims in a share it no longer
// serves, whatever its client's cache answered. A violation throws SimViolation, whose message
// holds the seed that replays it.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { appendFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { JOURNAL_FILE, readLeaseRecordsNoWrite } from "../../src/explore/state/lease-journal.ts";
import { sharesIdle } from "../../src/core/quiescence.ts";
import { owner as rendezvousOwner } from "../../src/core/rendezvous.ts";
import { journalFiles, readPartition, setPartitionFileReader } from "../../src/explore/state/lease-store/partition-lease.ts";
import { MemoryDisk, MemoryStore } from "../../src/explore/state/lease-store/memory.ts";
import { canonicalManifest, LeaseTable, type CommitManifest, type LeaseRecord } from "../../src/explore/state/lease-table.ts";
import { FaultyFiles, PartitionClients, rng, simulationRoot, StaleCacheStore, UnsyncedFenceStore } from "./lease-world-stores.ts";

export type StoreKind = "memory" | "shared-files" | "journal" | "partitioned";
export const STORE_KINDS: readonly StoreKind[] = ["memory", "shared-files", "journal", "partitioned"];

/**
 * Deliberately broken stores, to show that the simulation catches what it is meant to:
 *   stale-cache      each master reads its own cached copy of a record once it has one, so it
 *                    ignores the fences other masters issued since (a store without a shared view)
 *   unsynced-fence   commit fences are never synced before their children are published
 *   no-generation-check  (partitioned) a master never checks its share's generation: one that
 *                    stalled past its lease and woke goes on committing the share taken over
 *   stale-commit-check  (partitioned, stale reads) a write past `leased` checks the share's
 *                    record by a read that may be stale (as one without the lock) instead of
 *                    re-reading it under the lock
 */
export type Broken = "stale-cache" | "unsynced-fence" | "no-generation-check" | "stale-commit-check";

export interface SimOptions {
  kind: StoreKind;
  seed: number;
  /** Steps with faults; the calm steps after them are counted in the result too. */
  steps: number;
  masters?: number;
  contents?: number;
  durability?: "all" | "fence";
  broken?: Broken;
  /**
   * Partitioned: a master's read of a partition record without its short lock may return the
   * copy its client read up to this many ms before (0: every read is fresh). Default 0, and the
   * lease's length with the broken stale-commit-check.
   */
  staleReadsMs?: number;
}

export interface SimResult {
  steps: number;
  commits: number;
  faults: Record<string, number>;
}

export class SimViolation extends Error {}

const TTL = 1_000;
const ROOTS = 2;

interface Master {
  n: number;
  owner: string;
  table: LeaseTable;
  /** Its tasks and their fences, as this incarnation knows them. */
  held: Map<string, string>;
  /** Fences passed, publication still to do. */
  fenced: { id: string; fence: string }[];
  stalledUntil: number;
  files: FaultyFiles | null;
  /** Partitioned: how many times its process started (each start is a new holder name). */
  incarnation: number;
}

/** A result on its way from a worker to master `m`: delivered late, twice, or out of order. */
interface Result {
  m: number;
  id: string;
  fence: string;
}

export function simulate(o: SimOptions): SimResult {
  const world = new World(o);
  try {
    return world.run();
  } finally {
    world.close();
  }
}

class World {
  private readonly random: () => number;
  private readonly masters: Master[] = [];
  private readonly ids: string[];
  private readonly index = new Map<string, number>();
  private readonly durability: "all" | "fence";
  private readonly disk = new MemoryDisk();
  private readonly dir: string | null;
  /** The contents published so far (the corpus): claimable. */
  private readonly corpus = new Set<number>();
  private readonly done = new Set<string>();
  /** The one fence each content was committed under, and whether it had children. */
  private readonly commits = new Map<string, { fence: string; children: boolean }>();
  /** Records seen past their commit fence: their fence, which nothing may change. */
  private readonly fencedAt = new Map<string, string>();
  /** Empty commits and completions the table answered "completed", under their fence. */
  private readonly acknowledged = new Map<string, string>();
  private network: Result[] = [];
  private now = 1_000_000;
  private step = 0;
  private faulty = true;
  /** Whether the last attempt() failed with an injected EIO. */
  private failed = false;
  private readonly faults: Record<string, number> = {};
  /** Partitioned with stale reads: the clients the masters read partition records through. */
  private readonly clients: PartitionClients | null = null;

  constructor(private readonly o: SimOptions) {
    this.random = rng(o.seed);
    const staleMs = o.staleReadsMs ?? (o.broken === "stale-commit-check" ? TTL : 0);
    if (o.kind === "partitioned" && staleMs > 0) {
      // A generator of its own: the scheduler's choices stay those of the same seed without stale reads.
      this.clients = new PartitionClients(staleMs, () => this.now, rng(o.seed ^ 0x5ca1ab1e), o.broken === "stale-commit-check");
    }
    this.durability = o.durability ?? (o.seed % 2 === 0 ? "fence" : "all");
    const contents = o.contents ?? 40;
    this.ids = Array.from({ length: contents }, (_, i) => createHash("sha256").update(`sim content ${i}`).digest("hex"));
    this.ids.forEach((id, i) => this.index.set(id, i));
    for (let i = 0; i < ROOTS; i++) this.corpus.add(i);
    this.dir = o.kind === "memory" ? null : mkdtempSync(join(simulationRoot(), "fuzzfleet-lease-sim-"));
    const masters = o.kind === "journal" ? 1 : (o.masters ?? 3);
    // A journal is one process's: its holders are masters in name (slots of one process).
    const holders = o.kind === "journal" ? (o.masters ?? 3) : masters;
    for (let n = 0; n < holders; n++) {
      this.masters.push({ n, owner: `m${n}`, table: null as unknown as LeaseTable, held: new Map(), fenced: [], stalledUntil: 0, files: null, incarnation: 0 });
    }
    if (o.kind === "journal") this.reopenJournal();
    else for (const m of this.masters) this.reopen(m);
    // Last: nothing throws after it, so close() always undoes it. The first openings read under the lock anyway.
    if (this.clients !== null) setPartitionFileReader(this.clients.read);
  }

  close(): void {
    if (this.clients !== null) setPartitionFileReader(null);
    for (const table of new Set(this.masters.map((m) => m.table))) table?.close();
    if (this.dir !== null) rmSync(this.dir, { recursive: true, force: true });
  }

  run(): SimResult {
    for (; this.step < this.o.steps; this.step++) this.act();
    this.faulty = false;
    for (const m of this.masters) m.stalledUntil = 0;
    if (this.o.kind === "memory") this.disk.failWrites = this.disk.failSyncs = 0;
    for (const m of this.masters) if (m.files) m.files.failSyncs = 0;
    const calm = this.o.steps + 200 * this.ids.length;
    while (this.done.size < this.ids.length) {
      if (this.step >= calm) this.violation(`faults stopped ${calm - this.o.steps} steps ago and ${this.ids.length - this.done.size} contents are not done`);
      this.act();
      this.step++;
    }
    // Every content is done; each committed exactly once, and the table agrees.
    for (const id of this.ids) {
      if (!this.commits.has(id)) this.violation(`content ${this.index.get(id)} is done but was never committed`);
      const rec = this.global(id);
      if (rec?.status !== "done" || rec.token !== this.commits.get(id)!.fence) this.violation(`content ${this.index.get(id)} ends ${JSON.stringify(rec)}`);
    }
    if (this.clients !== null) this.faults["stale-read"] = this.clients.staleAnswers;
    return { steps: this.step, commits: this.commits.size, faults: this.faults };
  }

  // ---- the scheduler ----------------------------------------------------------------------

  private act(): void {
    const r = this.random();
    const m = this.masters[Math.floor(this.random() * this.masters.length)]!;
    if (r < 0.12) this.now += 1 + Math.floor(this.random() * (this.faulty ? 200 : 400));
    else if (this.faulty && r < 0.17) this.fault(m);
    else if (this.asleep(m)) this.now += 1 + Math.floor(this.random() * 50);
    else if (r < 0.35) this.claim(m);
    else if (r < 0.42) this.heartbeat(m);
    else if (r < 0.55) this.execute(m);
    else if (r < 0.75) this.deliver();
    else if (r < 0.9) this.publishNext(m);
    else this.recover(m);
    if (this.o.kind === "partitioned") this.checkQuiescence(m);
  }

  private asleep(m: Master): boolean {
    return this.now < m.stalledUntil;
  }

  private fault(m: Master): void {
    const kinds = ["crash", "stall"];
    if (this.o.kind === "memory" || this.o.kind === "shared-files") kinds.push("fail-write");
    if (this.o.kind === "memory") kinds.push("power-cut", "fail-sync");
    if (this.o.kind === "journal" || this.o.kind === "partitioned") kinds.push("torn-write");
    const kind = kinds[Math.floor(this.random() * kinds.length)]!;
    this.faults[kind] = (this.faults[kind] ?? 0) + 1;
    switch (kind) {
      case "crash":
        return this.crash(m);
      case "stall":
        m.stalledUntil = this.now + TTL + Math.floor(this.random() * 2 * TTL);
        return;
      case "fail-write":
        // Shared files: the directory fsync after a record's write fails.
        if (this.o.kind === "memory") this.disk.failWrites = 1;
        else m.files!.failSyncs = 1;
        return;
      case "fail-sync":
        this.disk.failSyncs = 1;
        return;
      case "power-cut":
        return this.powerCut();
      case "torn-write":
        return this.o.kind === "partitioned" ? this.tornShareWrite(m) : this.tornWrite();
    }
  }

  // ---- what a master does -----------------------------------------------------------------

  private claim(m: Master): void {
    const open = [...this.corpus].filter((i) => !this.done.has(this.ids[i]!));
    if (open.length === 0) return;
    const id = this.ids[open[Math.floor(this.random() * open.length)]!]!;
    this.checkedClaim(m, id);
  }

  /** A claim of `id`, checked: a record past its fence or an unexpired lease is never taken. */
  private checkedClaim(m: Master, id: string, ttlMs = TTL): void {
    const before = this.read(m, id);
    const outdated = this.clients?.staleAnswers ?? 0;
    const fence = this.attempt(() => this.as(m, () => m.table.claim(id, { hash: id, origin: this.index.get(id)! < ROOTS ? "initial" : "generated" }, m.owner, { now: this.now, ttlMs })));
    const after = this.read(m, id);
    // A claim in a share this master no longer serves hands out a task another master owns (it
    // would run twice): whatever a client's cache answered, the store must not let it through.
    if (fence !== null && this.o.kind === "partitioned" && !this.servesNow(m, id)) {
      const hid = (this.clients?.staleAnswers ?? 0) > outdated ? " (an outdated read hid the takeover)" : "";
      this.violation(`${m.owner} claimed ${this.name(id)} in a share it no longer serves${hid}: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
    }
    const free = before === null || (before.status === "leased" && (ttlMs === 0 || this.now - before.updated >= ttlMs));
    if (!free && fence) this.violation(`${m.owner} claimed ${this.name(id)} from ${JSON.stringify(before)}`);
    // A claim that failed after its write (a directory fsync) leaves a lease nobody holds, taken again after the TTL.
    const orphan = this.failed && after?.status === "leased" && after.updated === this.now;
    if (!fence && !orphan && !isDeepStrictEqual(before, after)) this.violation(`a refused claim of ${this.name(id)} changed ${JSON.stringify(before)} into ${JSON.stringify(after)}`);
    if (fence) {
      if (after?.token !== fence || after.status !== "leased") this.violation(`a claim of ${this.name(id)} answered ${fence} but left ${JSON.stringify(after)}`);
      m.held.set(id, fence);
    }
    this.checkFenced(id, after);
  }

  private heartbeat(m: Master): void {
    if (this.o.kind === "partitioned") {
      const lost = new Set(this.as(m, () => m.table.renewShares()));
      for (const id of [...m.held.keys()]) if (lost.has(this.shareOf(id))) m.held.delete(id);
    }
    if (m.held.size === 0) return;
    const before = new Map([...m.held.keys()].map((id) => [id, this.read(m, id)]));
    const r = this.attempt(() => this.as(m, () => m.table.heartbeatMany(new Map(m.held), this.now)));
    for (const [id, rec] of before) {
      const after = this.read(m, id);
      // Partitioned: only the holder the share's record names may renew (one that lost it may not).
      const current = rec !== null && rec.token === m.held.get(id) && rec.status !== "done" && (this.o.kind !== "partitioned" || this.servesNow(m, id));
      if (!current && !isDeepStrictEqual(rec, after)) this.violation(`a heartbeat under the stale fence ${m.held.get(id)} changed ${this.name(id)}`);
      if (r !== null && r.renewed.includes(id) !== current) this.violation(`heartbeat of ${this.name(id)} answered ${r.renewed.includes(id) ? "renewed" : "lost"} for ${JSON.stringify(rec)}`);
      this.checkFenced(id, after);
    }
    if (r !== null) for (const id of r.lost) m.held.delete(id);
  }

  /** A worker ran one of `m`'s tasks: its result goes on the network. */
  private execute(m: Master): void {
    const held = [...m.held];
    if (held.length === 0) return;
    const [id, fence] = held[Math.floor(this.random() * held.length)]!;
    m.held.delete(id);
    this.network.push({ m: m.n, id, fence });
  }

  /** One result arrives, in any order; while faults last, it may be delivered again later. */
  private deliver(): void {
    if (this.network.length === 0) return;
    const i = Math.floor(this.random() * this.network.length);
    const res = this.network[i]!;
    const m = this.masters[res.m]!;
    if (this.asleep(m)) return;
    if (!this.faulty || this.random() < 0.8) this.network.splice(i, 1);
    else this.faults.duplicate = (this.faults.duplicate ?? 0) + 1;
    const children = this.childrenOf(res.id);
    const manifest = this.manifest(children);
    if (children.length === 0) {
      // A result without children commits empty; one over a budget is completed as it is.
      const overBudget = this.random() < 0.25;
      this.fenced(m, res.id, res.fence, () => {
        const r = overBudget ? m.table.complete(res.id, res.fence, this.now) : m.table.commitEmpty(res.id, res.fence, manifest, this.now);
        if (r === "completed") this.acknowledged.set(res.id, res.fence);
        return r === "completed";
      });
      return;
    }
    this.fenced(m, res.id, res.fence, () => {
      // The fences of a batch: deferred, then synced before anything is published.
      const ok = m.table.deferredBatch(() => m.table.beginCommit(res.id, res.fence, manifest, this.now));
      m.table.sync();
      return ok;
    }, () => m.fenced.push({ id: res.id, fence: res.fence }));
  }

  private publishNext(m: Master): void {
    const next = m.fenced.shift();
    if (next === undefined) return;
    this.fenced(m, next.id, next.fence, () => {
      const r = m.table.replayCommit(next.id, next.fence, (man) => this.publish(m, next.id, next.fence, man), this.now);
      return r === "completed";
    });
  }

  /** What a master does after a restart, and now and then: replay every commit past its fence, reclaim expired leases. */
  private recover(m: Master): void {
    if (this.o.kind === "partitioned") this.takeOver(m);
    const committing = this.attempt(() => this.as(m, () => m.table.recoverCommitting())) ?? [];
    for (const c of committing) {
      this.fenced(m, c.id, c.fence, () => {
        const r = m.table.replayCommit(c.id, c.fence, (man) => this.publish(m, c.id, c.fence, man), this.now);
        return r === "completed";
      });
    }
    const expired = this.attempt(() => this.as(m, () => m.table.recoverExpired(this.now, TTL, 4))) ?? [];
    for (const e of expired) this.checkedClaim(m, e.id);
  }

  /** Partitioned: `m` takes over every share whose lease expired; their leased records run again at once. */
  private takeOver(m: Master): void {
    const root = join(this.dir!, "leases");
    const before = new Map(this.ranks.map((r) => [r, readPartition(root, r)]));
    for (const t of this.as(m, () => m.table.takeOverShares())) {
      if (t.kind !== "taken") continue;
      const prev = before.get(t.rank) ?? null;
      if (prev !== null && prev.holder !== "" && this.now - prev.heartbeat < TTL) {
        this.violation(`m${m.n} took over share ${t.rank} while its holder ${prev.holder}'s lease was live (renewed ${this.now - prev.heartbeat} ms ago)`);
      }
      this.faults.takeover = (this.faults.takeover ?? 0) + 1;
      this.checkAll(m);
      for (const rec of t.records) if (rec.status === "leased") this.checkedClaim(m, rec.id, 0);
    }
  }

  /**
   * Partitioned: when every share is served by a live holder that is idle (no task, no result on
   * its way, nothing to publish, no open content of its shares after a rescan), nothing may be left
   * anywhere: every content of the corpus is done. The shares are as master `looker` reads them
   * (as a master deciding on quiescence does: through its client, without the lock).
   */
  private checkQuiescence(looker: Master): void {
    if (this.network.length > 0 || this.asleep(looker)) return;
    const idle = new Set<string>();
    for (const m of this.masters) {
      if (this.asleep(m) || m.held.size > 0 || m.fenced.length > 0) continue;
      const open = [...this.corpus].some((i) => m.table.partition!.mayHold(this.ids[i]!) && m.table.record(this.ids[i]!)?.status !== "done");
      if (!open) idle.add(this.holderOf(m));
    }
    if (idle.size === 0) return;
    const shares = this.as(looker, () => looker.table.partition!.partitions()).map(({ rank, holder, live }) => ({ rank, holder, live }));
    if (!sharesIdle(shares, idle)) return;
    for (const i of this.corpus) {
      const rec = this.global(this.ids[i]!);
      if (rec?.status !== "done") this.violation(`the fleet counts as quiescent (${JSON.stringify(shares)}) while ${this.name(this.ids[i]!)} is ${JSON.stringify(rec)}`);
    }
    this.faults.quiescent = (this.faults.quiescent ?? 0) + 1;
  }

  /** Whether the share of `id` is `m`'s by its partition record. */
  private servesNow(m: Master, id: string): boolean {
    return readPartition(join(this.dir!, "leases"), this.shareOf(id))?.holder === this.holderOf(m);
  }

  private holderOf(m: Master): string {
    return `${m.owner}#${m.incarnation}`;
  }

  private get ranks(): number[] {
    return this.masters.map((m) => m.n);
  }

  private shareOf(id: string): number {
    return rendezvousOwner(id, this.ranks);
  }

  /** The record as the table that holds it reads it (partitioned: the master the share's record names). */
  private global(id: string): LeaseRecord | null {
    if (this.o.kind !== "partitioned") return this.masters[0]!.table.record(id);
    const share = readPartition(join(this.dir!, "leases"), this.shareOf(id));
    const holder = this.masters.find((m) => share !== null && this.holderOf(m) === share.holder && m.table.partition!.mayHold(id));
    if (holder !== undefined) return holder.table.record(id);
    // A share nobody serves (its holder crashed; it waits for a takeover): as its journal left it.
    return readLeaseRecordsNoWrite(join(this.dir!, "leases"), 4).find((r) => r.id === id) ?? null;
  }

  // ---- checks -----------------------------------------------------------------------------

  /**
   * Runs a transition under `fence` on `id` and checks it: under a stale fence (the record is
   * not under it, or there is none) it must be refused and change nothing; a record past its
   * commit fence keeps its fence. `then` runs when the transition succeeded.
   */
  private fenced(m: Master, id: string, fence: string, op: () => boolean, then?: () => void): void {
    const before = this.read(m, id);
    const ok = this.attempt(() => this.as(m, op, true));
    const after = this.read(m, id);
    const stale = before === null || before.token !== fence;
    if (stale && ok) this.violation(`${m.owner} succeeded on ${this.name(id)} under the stale fence ${fence} (record ${JSON.stringify(before)})`);
    if (stale && !isDeepStrictEqual(before, after)) this.violation(`a stale fence ${fence} changed ${this.name(id)}: ${JSON.stringify(before)} -> ${JSON.stringify(after)}`);
    this.checkFenced(id, after);
    if (ok && then) then();
  }

  /** A record seen past its commit fence keeps that fence, and never goes back to `leased`. */
  private checkFenced(id: string, rec: LeaseRecord | null): void {
    const was = this.fencedAt.get(id);
    if (was !== undefined && (rec === null || rec.token !== was || rec.status === "leased")) {
      this.violation(`${this.name(id)} was past its commit fence under ${was} and is now ${JSON.stringify(rec)}: stolen`);
    }
    if (rec !== null && rec.status !== "leased") this.fencedAt.set(id, rec.token);
    if (rec?.status !== "done") return;
    this.done.add(id);
    // An empty commit (or a completion without one) is its done record (its sync may have failed
    // after the write: it is done all the same).
    if (rec.commit === undefined || rec.commit.hashes.length === 0) this.committed(rec.owner, id, rec.token, []);
  }

  /** The publication of `id`'s children under `fence`: the one commit of its content. */
  private publish(m: Master, id: string, fence: string, manifest: CommitManifest): void {
    if (this.o.kind === "memory") {
      const durable = this.disk.durable.get(id);
      if (durable?.token !== fence || durable.status === "leased") {
        this.violation(`${m.owner} publishes the children of ${this.name(id)} while its fence ${fence} is not durable (durable: ${JSON.stringify(durable ?? null)})`);
      }
    }
    this.committed(m.owner, id, fence, manifest.hashes);
  }

  private committed(owner: string, id: string, fence: string, children: string[]): void {
    const earlier = this.commits.get(id);
    if (earlier !== undefined && earlier.fence !== fence) this.violation(`${this.name(id)} committed twice: under ${earlier.fence}, then by ${owner} under ${fence}`);
    this.commits.set(id, { fence, children: children.length > 0 });
    for (const c of children) this.corpus.add(this.index.get(c)!);
  }

  /** The record as the acting master's table reads it; a failing read (none here) would throw. */
  private read(m: Master, id: string): LeaseRecord | null {
    // Partitioned: the record as the share's current holder has it, whatever `m` believes.
    const rec = this.o.kind === "partitioned" ? this.global(id) : m.table.record(id);
    return rec === null ? null : structuredClone(rec);
  }

  /** Runs `fn` as master `m` reading partition records through its client (`commit`: a write past `leased`). */
  private as<T>(m: Master, fn: () => T, commit = false): T {
    return this.clients === null ? fn() : this.clients.as(m.n, fn, commit);
  }

  /** Runs `fn`; an injected EIO is the answer "it failed" (the master does not know more). */
  private attempt<T>(fn: () => T): T | null {
    this.failed = false;
    try {
      return fn();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EIO") throw err;
      this.faults.eio = (this.faults.eio ?? 0) + 1;
      this.failed = true;
      return null;
    }
  }

  // ---- crashes ----------------------------------------------------------------------------

  private crash(m: Master): void {
    if (this.o.kind === "journal") return this.reopenJournal();
    this.reopen(m);
  }

  /** One master's process ends (its memory is gone) and starts again on the same store. */
  private reopen(m: Master): void {
    // A partitioned master's crash leaves its share named as held (taken over once its lease expires).
    if (this.o.kind === "partitioned") this.as(m, () => m.table?.partition?.abandon());
    else m.table?.close();
    m.held.clear();
    m.fenced = [];
    m.stalledUntil = 0;
    if (this.o.kind === "memory") {
      const store = this.o.broken === "stale-cache" ? new StaleCacheStore(this.disk, this.durability)
        : this.o.broken === "unsynced-fence" ? new UnsyncedFenceStore(this.disk, this.durability)
        : new MemoryStore(this.disk, this.durability);
      m.table = new LeaseTable({ root: "memory", durability: this.durability }, store);
    } else if (this.o.kind === "partitioned") {
      m.incarnation++;
      m.table = new LeaseTable({ root: join(this.dir!, "leases"), durability: this.durability, shardCount: 4 });
      this.as(m, () => m.table.takePartition({
        rank: m.n,
        ranks: this.ranks,
        holder: this.holderOf(m),
        epoch: "sim",
        ttlMs: TTL,
        wallNow: () => this.now,
        needLockFree: false,
        checkGeneration: this.o.broken !== "no-generation-check",
        ownShare: "if-free",
      }));
    } else {
      const root = join(this.dir!, "leases");
      m.files = new FaultyFiles({ root, durability: this.durability, shardCount: 4 });
      m.table = new LeaseTable({ root, durability: this.durability }, m.files);
    }
    this.checkAll(m);
  }

  /** The process owning the journal ends and starts again: the next opening absorbs its journal. */
  private reopenJournal(): void {
    const root = join(this.dir!, "leases");
    this.masters[0]!.table?.close();
    const table = new LeaseTable({ root, durability: this.durability, shardCount: 4 });
    table.takeExclusive();
    for (const m of this.masters) {
      m.table = table;
      m.held.clear();
      m.fenced = [];
      m.stalledUntil = 0;
    }
    this.checkAll(this.masters[0]!);
  }

  /** A crash in the middle of a journal line's write: part of a line, then the process is gone. */
  private tornWrite(): void {
    const root = join(this.dir!, "leases");
    const live = readdirSync(root).filter((n) => JOURNAL_FILE.test(n));
    assert.equal(live.length, 1, `one live journal (${live.join(", ")})`);
    const line = JSON.stringify({ put: { id: this.ids[0], status: "done" } });
    appendFileSync(join(root, live[0]!), line.slice(0, 1 + Math.floor(this.random() * (line.length - 1))));
    this.reopenJournal();
  }

  /** Partitioned: `m` crashes in the middle of a line of its own share's journal; the next holder drops the torn tail. */
  private tornShareWrite(m: Master): void {
    const root = join(this.dir!, "leases");
    const rec = readPartition(root, m.n);
    if (rec?.holder === this.holderOf(m)) {
      const files = journalFiles(root, rec.journal);
      const line = JSON.stringify({ put: { id: this.ids[0], status: "done" } });
      if (files.length > 0) appendFileSync(files.at(-1)!, line.slice(0, 1 + Math.floor(this.random() * (line.length - 1))));
    }
    this.reopen(m);
  }

  /** Every process is gone and only what was synced is left: no published fence may be lost. */
  private powerCut(): void {
    this.disk.powerCut();
    this.fencedAt.clear();
    for (const [id, c] of [...this.commits]) {
      const rec = this.disk.visible.get(id);
      const kept = rec !== undefined && rec.token === c.fence && rec.status !== "leased";
      if (kept) continue;
      // An empty commit publishes nothing: a power cut may undo one that was not made durable
      // (--sync fence, or its sync failed and the table said so), and it is redone. Under --sync
      // all, one the table acknowledged must survive.
      const acknowledged = this.acknowledged.get(id) === c.fence;
      if (!c.children && !(acknowledged && this.durability === "all")) {
        this.commits.delete(id);
        this.done.delete(id);
        continue;
      }
      this.violation(`a power cut lost the commit of ${this.name(id)} under ${c.fence} (left ${JSON.stringify(rec ?? null)})`);
    }
    for (const id of [...this.done]) if (this.disk.visible.get(id)?.status !== "done") this.done.delete(id);
    for (const m of this.masters) this.reopen(m);
  }

  /** After a reopening: every record the table holds is checked against what was seen before. */
  private checkAll(m: Master): void {
    // Partitioned: what `m` holds may be a lost share's stale view; the share's holder has the record.
    for (const rec of m.table.snapshot()) this.checkFenced(rec.id, this.o.kind === "partitioned" ? this.read(m, rec.id) : rec);
    for (const id of this.fencedAt.keys()) if (this.read(m, id) === null) this.checkFenced(id, null);
  }

  // ---- the corpus -------------------------------------------------------------------------

  /** Content i's children: 2i + ROOTS and 2i + ROOTS + 1, while there are contents. */
  private childrenOf(id: string): string[] {
    const i = this.index.get(id)!;
    return [2 * i + ROOTS, 2 * i + ROOTS + 1].filter((c) => c < this.ids.length).map((c) => this.ids[c]!);
  }

  private manifest(children: string[]): CommitManifest {
    return canonicalManifest({ worker: "w", staging_id: children.length === 0 ? "" : "0".repeat(32), hashes: children, num_generated: children.length });
  }

  private name(id: string): string {
    return `content ${this.index.get(id)}`;
  }

  private violation(what: string): never {
    const broken = (this.o.broken ? ` --broken ${this.o.broken}` : "") + (this.o.staleReadsMs ? ` --stale-reads ${this.o.staleReadsMs}` : "");
    throw new SimViolation(
      `lease simulation (${this.o.kind}, --sync ${this.durability}, seed ${this.o.seed}) violated at step ${this.step}: ${what}\n` +
        `replay: node --import tsx bench/explore-sim.mjs --store ${this.o.kind} --seed ${this.o.seed} --runs 1 --steps ${this.o.steps} --contents ${this.ids.length}${broken}`,
    );
  }
}
