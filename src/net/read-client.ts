// Client side of the read-only requests (`status --master`, `failures --master`): one frame out,
// one reply back, then the connection closes.
import { printable } from "../core/log-lines.ts";
import { RefusedError, RuntimeFailure } from "../errors.ts";
import { dial } from "./connection.ts";
import { ReadReply, type Frame } from "./messages.ts";

const TIMEOUT_MS = 30_000;

export async function remoteRead(host: string, port: number, request: Frame): Promise<{ type: "text"; text: string } | { type: "json"; data: unknown }> {
  let conn;
  try {
    conn = await dial(host, port, TIMEOUT_MS);
  } catch (err) {
    throw new RuntimeFailure(`cannot reach the coordinator at ${host}:${port} — ${(err as Error).message}`);
  }
  try {
    const reply = await conn.request(request, ReadReply, TIMEOUT_MS);
    if (reply.type === "refuse") throw new RefusedError(`the coordinator refused: ${printable(reply.reason, { max: 2000 })}`);
    // The text is printed as is: only control characters of a hostile coordinator are changed.
    return reply.type === "text" ? { type: "text", text: reply.text.split("\n").map((l) => printable(l, { max: Infinity, tabs: true })).join("\n") } : reply;
  } catch (err) {
    if (err instanceof RefusedError) throw err;
    throw new RuntimeFailure(`the coordinator at ${host}:${port} did not answer: ${(err as Error).message}`);
  } finally {
    conn.destroy();
  }
}
