// The frame codec: ASCII decimal byte length, "\n", then that many bytes of UTF-8 JSON (an object
// with a string `type`). The length is checked against the decoder's cap before a single body
// byte is buffered, so a peer cannot make us allocate more than the cap: MAX_FRAME_BYTES once a
// connection is authenticated, FIRST_FRAME_BYTES before its token was checked.
import assert from "node:assert/strict";
import { printable } from "../core/log-lines.ts";
import { ProtocolError } from "../errors.ts";

export const MAX_FRAME_BYTES = 4 << 20;
/**
 * The cap on frames before the token is checked. Every legitimate first frame fits, whatever its
 * characters: hello, status and failures by their schemas' string limits (each character at most
 * 6 bytes as a JSON escape: under 3.2 KiB), peer_hello because the submaster shortens its
 * informative setup_text to fit (src/explore/fleet/peers.ts).
 */
export const FIRST_FRAME_BYTES = 8 << 10;
/** Stateless between calls (no `stream` option), so one serves every decoder. */
const UTF8 = new TextDecoder("utf-8", { fatal: true });
/** Enough digits for MAX_FRAME_BYTES; a longer header is rejected without waiting for "\n". */
const MAX_HEADER_DIGITS = String(MAX_FRAME_BYTES).length;

export function encodeFrame(frame: { type: string }): Buffer {
  const body = Buffer.from(JSON.stringify(frame), "utf8");
  if (body.length > MAX_FRAME_BYTES) {
    throw new ProtocolError(`frame '${frame.type}' is ${body.length} bytes, over the ${MAX_FRAME_BYTES}-byte cap`);
  }
  return Buffer.concat([Buffer.from(`${body.length}\n`, "ascii"), body]);
}

/**
 * Incremental decoder: push() bytes as they arrive, then take complete frames with next().
 * Any framing error is sticky: the stream cannot be resynchronised, the connection must close.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  private expected: number | null = null;
  private failure: ProtocolError | null = null;

  /** `cap`: the largest body accepted (at most MAX_FRAME_BYTES); `limit` changes it later. */
  constructor(private cap: number = MAX_FRAME_BYTES) {
    assert.ok(cap <= MAX_FRAME_BYTES, `frame cap ${cap} is over MAX_FRAME_BYTES`);
  }

  get limit(): number {
    return this.cap;
  }

  /** Applies to frames whose header is not read yet. */
  set limit(bytes: number) {
    assert.ok(bytes <= MAX_FRAME_BYTES, `frame cap ${bytes} is over MAX_FRAME_BYTES`);
    this.cap = bytes;
  }

  /** Bytes held and not yet returned as frames. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** The declared body length of a frame whose header was read and whose body is incomplete, else null. */
  bodyPending(): number | null {
    return this.expected !== null && this.buffered < this.expected ? this.expected : null;
  }

  push(data: Buffer): void {
    if (this.failure) return;
    this.chunks.push(data);
    this.buffered += data.length;
  }

  /** The next complete frame's parsed JSON, or undefined if more bytes are needed. Throws ProtocolError. */
  next(): unknown {
    if (this.failure) throw this.failure;
    try {
      return this.decode();
    } catch (err) {
      this.failure = err instanceof ProtocolError ? err : new ProtocolError(String(err));
      this.chunks = [];
      this.buffered = 0;
      throw this.failure;
    }
  }

  private decode(): unknown {
    if (this.expected === null) {
      const all = this.join();
      const nl = all.indexOf(0x0a);
      const headerEnd = nl === -1 ? all.length : nl;
      const header = all.subarray(0, Math.min(headerEnd, MAX_HEADER_DIGITS + 1)).toString("latin1");
      if (!/^\d*$/.test(header)) throw new ProtocolError(`bad frame header (expected a decimal length, got ${quote(header)})`);
      if (header.length > MAX_HEADER_DIGITS) throw new ProtocolError(`frame length ${header}… is over the ${MAX_FRAME_BYTES}-byte cap`);
      if (nl === -1) {
        // More digits than the cap has are over it before the newline arrives.
        if (header.length > String(this.cap).length) throw this.overCap(`${header}…`);
        return undefined;
      }
      if (header.length === 0) throw new ProtocolError("bad frame header (empty length)");
      const length = Number(header);
      if (length > MAX_FRAME_BYTES) throw new ProtocolError(`frame length ${length} is over the ${MAX_FRAME_BYTES}-byte cap`);
      if (length > this.cap) throw this.overCap(String(length));
      if (length === 0) throw new ProtocolError("empty frame");
      this.expected = length;
      this.consume(nl + 1);
    }
    if (this.buffered < this.expected) return undefined;
    const all = this.join();
    const body = all.subarray(0, this.expected);
    this.consume(this.expected);
    this.expected = null;
    let text: string;
    try {
      text = UTF8.decode(body);
    } catch {
      throw new ProtocolError("frame body is not valid UTF-8");
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      // V8's message quotes the body: it is the peer's text, so it is shown escaped and cut.
      throw new ProtocolError(`frame body is not JSON (${printable((err as Error).message, { max: 120 })})`);
    }
    if (typeof value !== "object" || value === null || Array.isArray(value) || typeof (value as { type?: unknown }).type !== "string") {
      throw new ProtocolError("frame is not a JSON object with a string 'type'");
    }
    return value;
  }

  private overCap(length: string): ProtocolError {
    const when = this.cap < MAX_FRAME_BYTES ? " of a first frame (before the token is checked)" : "";
    return new ProtocolError(`frame length ${length} is over the ${this.cap}-byte cap${when}`);
  }

  private join(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.buffered)];
    return this.chunks[0] ?? Buffer.alloc(0);
  }

  private consume(n: number): void {
    const all = this.join();
    const rest = all.subarray(n);
    this.chunks = rest.length ? [rest] : [];
    this.buffered = rest.length;
  }
}

function quote(s: string): string {
  return `'${printable(s, { max: 20 })}'`;
}
