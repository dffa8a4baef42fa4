// The fsync half of promoting a batch of staged children (commit-batch.ts): every child the batch
// will move is opened without following a symlink and fsynced in libuv's pool, all at once, so
// that the file system commits them together and the event loop goes on meanwhile. Promotion
// (promotion.ts) then links each one in and checks that what arrived is the very file synced.
import { closeSync, constants, fstatSync, fsync, openSync } from "node:fs";
import { join } from "node:path";
import type { PinnedDir } from "../../files/pinned-dir.ts";
import { HEX64 } from "../../core/message-checks.ts";
import { lstatOrNull } from "./durable.ts";

export interface FileIdentity {
  dev: number;
  ino: number;
}

/**
 * The fsync half of promotion, for a batch, off the event loop: opens each staged child that
 * promotion will move (not public yet, not trusted; never through a symlink) and fsyncs them all
 * at once in libuv's pool, where the file system can commit them together. Resolves, per item,
 * with the identity of every child of its stage it synced (promoteChildren's `synced`: two stages
 * of a batch may hold the same content, each its own file); a child it cannot open is left for
 * promotion itself to refuse or fsync.
 */
export async function syncStagedChildren(
  items: readonly { stage: PinnedDir; hashes: readonly string[] }[],
  corpusDir: string,
  trusted: (hash: string) => boolean,
): Promise<Map<string, FileIdentity>[]> {
  const open: { item: number; hash: string; fd: number; id: FileIdentity }[] = [];
  try {
    for (const [item, { stage, hashes }] of items.entries()) {
      for (const hash of new Set(hashes)) {
        if (!HEX64.test(hash) || trusted(hash) || lstatOrNull(join(corpusDir, hash)) !== null) continue;
        let fd: number;
        try {
          fd = openSync(stage.entry(hash), constants.O_RDONLY | constants.O_NOFOLLOW | (constants.O_NONBLOCK ?? 0));
        } catch {
          continue;
        }
        const st = fstatSync(fd);
        if (!st.isFile()) {
          closeSync(fd);
          continue;
        }
        open.push({ item, hash, fd, id: { dev: st.dev, ino: st.ino } });
      }
    }
    await Promise.all(open.map(({ fd }) => new Promise<void>((ok, fail) => fsync(fd, (err) => (err ? fail(err) : ok())))));
    const out = items.map(() => new Map<string, FileIdentity>());
    for (const { item, hash, id } of open) out[item].set(hash, id);
    return out;
  } finally {
    for (const { fd } of open) closeSync(fd);
  }
}
