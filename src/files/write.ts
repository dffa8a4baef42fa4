// Writing a whole buffer through a descriptor: writeSync may write less than it was given.
import { writeSync } from "node:fs";

/** Writes all of `data` at the descriptor's position. */
export function writeFully(fd: number, data: Uint8Array): void {
  for (let off = 0; off < data.length; ) off += writeSync(fd, data, off, data.length - off);
}
