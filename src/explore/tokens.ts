// Random tokens of the master-to-master protocol (PREPARE, statistics): 256 bits as 64 hex.
import { randomBytes } from "node:crypto";

export function randomToken(): string {
  return randomBytes(32).toString("hex");
}
