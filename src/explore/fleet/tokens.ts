// Random tokens of the master-to-master protocol (PREPARE, statistics): 256 bits as 64 hex.
import { randomHex } from "../../util/random-hex.ts";

export function randomToken(): string {
  return randomHex(32);
}
