// Where the files of a worker without the shared directory land on the coordinator: each piece of
// a unit's failures/ and quarantine/ files (net/messages.ts, `put`) is written at once below the
// unit's own scratch directory (<out>/tmp/chunk-N, or minimize-N), the directory a worker in the
// shared directory would have written, and hashed as it comes; the unit's `done` then says how
// many files and bytes were sent, and only a landing that holds exactly those, every one complete
// and matching its SHA-256, is handed to the same ingest as a shared worker's. Anything else is
// removed and the unit is booked as interrupted (swept again): never ingested twice, never in part.
//
// Per unit:  (none) --put at offset 0--> receiving a file --its last piece, digest good--> between
//            files --put at offset 0--> receiving ...;  done --> settled (kept or removed)
//            any --a bad piece (name, order, cap, digest)--> the worker is refused (the caller ends
//            the connection, its units are taken back, dropAll removes what landed)
//
// Memory: one piece at a time (the frame being handled) and one open descriptor per unit in flight.
// Nothing a worker sends is trusted: names are checked component by component (plain names only,
// below the unit's results directory), sizes against the caps before a byte is written, each file
// created new (O_EXCL, O_NOFOLLOW) in a directory this process made.
import { createHash, type Hash } from "node:crypto";
import { closeSync, constants, mkdirSync, openSync, writeSync } from "node:fs";
import { join, relative } from "node:path";
import { printable } from "../../core/log-lines.ts";
import type { TransferCaps } from "../../config/schema.ts";
import { formatInt } from "../../config/format.ts";
import { removeBelow } from "../../files/pinned-dir.ts";
import type { PutFrame, SentFilesT } from "../../net/messages.ts";

/** How deep below a unit's {out} a sent file may lie. */
const MAX_DEPTH = 32;
const NAME_MAX_BYTES = 255;

/** Where one unit's files land and which paths below it are its results. */
export interface LandingPlace {
  /** The unit's scratch directory on the coordinator (<out>/tmp/chunk-N). */
  dir: string;
  /** Path prefixes (components) a sent file must start with: [...results, "failures"], [...results, "quarantine"]. */
  prefixes: string[][];
}

interface Receiving {
  path: string;
  size: number;
  received: number;
  hash: Hash;
  fd: number;
}

interface UnitFiles {
  place: LandingPlace;
  files: number;
  bytes: number;
  current: Receiving | null;
}

/** The files one worker is sending, per unit (by wire id). */
export class UnitLanding {
  private readonly units = new Map<number, UnitFiles>();

  constructor(
    private readonly outDir: string,
    private readonly caps: TransferCaps,
  ) {}

  /** Bytes and files landed so far for `unit` (for tests and the log). */
  landed(unit: number): { files: number; bytes: number } | null {
    const u = this.units.get(unit);
    return u ? { files: u.files, bytes: u.bytes } : null;
  }

  /** Lands one piece. Returns why the worker is refused, or null. */
  put(f: PutFrame, place: LandingPlace): string | null {
    const problem = this.land(f, place);
    if (problem !== null) this.drop(f.unit);
    return problem;
  }

  private land(f: PutFrame, place: LandingPlace): string | null {
    const data = Buffer.from(f.data, "base64");
    let u = this.units.get(f.unit);
    if (f.offset === 0) {
      if (u?.current) return `put of ${f.path} began before ${u.current.path} was complete`;
      const name = checkSentPath(f.path, place.prefixes);
      if (name !== null) return name;
      if (!u) {
        u = { place, files: 0, bytes: 0, current: null };
        this.units.set(f.unit, u);
        // A fresh directory: whatever an earlier attempt left under this name is not part of it.
        removeBelow(this.outDir, relative(this.outDir, place.dir));
        mkdirSync(place.dir, { recursive: true });
      }
      const over = this.overCap(u, f.size);
      if (over !== null) return over;
      const target = join(place.dir, ...f.path.split("/"));
      mkdirSync(join(target, ".."), { recursive: true });
      let fd: number;
      try {
        fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
      } catch (err) {
        return `cannot land ${f.path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): sent twice, or its name collides`;
      }
      u.current = { path: f.path, size: f.size, received: 0, hash: createHash("sha256"), fd };
      u.files++;
    }
    const c = u?.current;
    if (!u || !c || c.path !== f.path || c.size !== f.size || c.received !== f.offset) {
      return `put of ${f.path} at offset ${f.offset} is out of order${c ? ` (expected ${c.path} at ${c.received})` : ""}`;
    }
    if (c.received + data.length > c.size) return `put of ${f.path} runs past its declared size ${c.size}`;
    writeAll(c.fd, data);
    c.hash.update(data);
    c.received += data.length;
    u.bytes += data.length;
    if (c.received < c.size) return f.sha256 === null ? null : `put of ${f.path} carries its digest before its last piece`;
    closeSync(c.fd);
    u.current = null;
    const digest = c.hash.digest("hex");
    if (f.sha256 !== digest) return `${f.path} arrived with SHA-256 ${digest.slice(0, 12)}…, the worker declared ${f.sha256 === null ? "none" : `${f.sha256.slice(0, 12)}…`}`;
    return null;
  }

  private overCap(u: UnitFiles, size: number): string | null {
    const c = this.caps;
    if (u.files + 1 > c.maxFiles) return `more than ${formatInt(c.maxFiles)} files for one unit ([distributed] transfer_max_files)`;
    if (size > c.maxFileBytes) return `a file of ${formatInt(size)} bytes, over ${formatInt(c.maxFileBytes)} ([distributed] transfer_max_file_mib)`;
    if (u.bytes + size > c.maxBytes) return `more than ${formatInt(c.maxBytes)} bytes for one unit ([distributed] transfer_max_mib)`;
    return null;
  }

  /**
   * The unit reported: keeps what landed when it is exactly what the worker says it sent (and
   * gives {out} the shape the worker's run left, so ingest reads it as a shared worker's), or
   * removes it and says why. `sent` null: the worker sent no account (treated as nothing sent).
   */
  settle(unit: number, place: LandingPlace | null, sent: SentFilesT | null): string | null {
    const u = this.units.get(unit) ?? null;
    const files = u?.files ?? 0;
    const bytes = u?.bytes ?? 0;
    let problem: string | null = null;
    if (u?.current) problem = `${u.current.path} arrived in part (${formatInt(u.current.received)} of ${formatInt(u.current.size)} bytes)`;
    else if ((sent?.count ?? 0) !== files || (sent?.bytes ?? 0) !== bytes) {
      problem = `the worker sent ${formatInt(sent?.count ?? 0)} file(s) of ${formatInt(sent?.bytes ?? 0)} bytes, ${formatInt(files)} of ${formatInt(bytes)} bytes landed`;
    } else if (files > 0 && place !== null && u!.place.dir !== place.dir) problem = "its files landed for another unit";
    if (problem !== null) {
      this.drop(unit);
      return problem;
    }
    this.units.delete(unit);
    // {out} written without the results directory breaks the generator contract; ingest must see it.
    if (sent?.wrote === "out" && place !== null) mkdirSync(place.dir, { recursive: true });
    return null;
  }

  /** Removes what landed for `unit` (it was taken back, or a piece was refused). */
  drop(unit: number): void {
    const u = this.units.get(unit);
    if (!u) return;
    this.units.delete(unit);
    if (u.current) closeSync(u.current.fd);
    try {
      removeBelow(this.outDir, relative(this.outDir, u.place.dir));
    } catch {
      // Left for the session's scratch cleanup (removeSessionScratch) and the next start.
    }
  }

  /** The worker is gone: nothing it was sending is kept. */
  dropAll(): void {
    for (const unit of [...this.units.keys()]) this.drop(unit);
  }

  /** Units with files landed or landing. */
  get pending(): number[] {
    return [...this.units.keys()];
  }
}

/** Why `path` may not land, or null: plain names only, below one of `prefixes`. */
export function checkSentPath(path: string, prefixes: string[][]): string | null {
  const parts = path.split("/");
  if (parts.length > MAX_DEPTH) return `sent path ${shown(path)} is more than ${MAX_DEPTH} levels deep`;
  for (const p of parts) {
    if (p === "" || p === "." || p === ".." || p.includes("\0") || Buffer.byteLength(p) > NAME_MAX_BYTES) {
      return `sent path ${shown(path)} has a component that is not a plain file name`;
    }
  }
  const under = prefixes.some((pre) => parts.length > pre.length && pre.every((c, i) => parts[i] === c));
  if (!under) return `sent path ${shown(path)} is not below ${prefixes.map((p) => p.join("/")).join(" or ")}`;
  return null;
}

function shown(path: string): string {
  return `'${printable(path, { max: 200 })}'`;
}

function writeAll(fd: number, data: Buffer): void {
  for (let at = 0; at < data.length; ) at += writeSync(fd, data, at, data.length - at);
}
