// A framed, validated connection over one TCP socket. Every wait has a deadline; a frame that
// breaks the framing or its schema is a ProtocolError, after which the connection is unusable.
import { connect as netConnect, type Socket } from "node:net";
import type { z } from "zod";
import { ProtocolError } from "../errors.ts";
import { encodeFrame, FrameDecoder } from "./frame.ts";
import { check, type Frame } from "./messages.ts";

/** No frame arrived before the deadline. */
export class FrameTimeout extends ProtocolError {}
/** The peer closed the connection. */
export class PeerClosed extends ProtocolError {}

type Waiter = { resolve: (v: unknown) => void; reject: (e: Error) => void };

export class Connection {
  readonly remote: string;
  private readonly decoder = new FrameDecoder();
  private readonly frames: unknown[] = [];
  private waiter: Waiter | null = null;
  private ended: Error | null = null;

  constructor(readonly socket: Socket) {
    this.remote = `${socket.remoteAddress ?? "?"}:${socket.remotePort ?? "?"}`;
    socket.setNoDelay(true);
    socket.on("data", (data: Buffer) => {
      this.decoder.push(data);
      try {
        for (let f = this.decoder.next(); f !== undefined; f = this.decoder.next()) this.frames.push(f);
      } catch (err) {
        this.fail(err as Error);
        return;
      }
      this.wake();
    });
    socket.on("end", () => this.fail(new PeerClosed(`${this.remote} closed the connection`)));
    socket.on("close", () => this.fail(new PeerClosed(`${this.remote} closed the connection`)));
    socket.on("error", (err) => this.fail(new PeerClosed(`connection to ${this.remote} failed: ${err.message}`, { cause: err })));
  }

  get closed(): boolean {
    return this.ended !== null || this.socket.destroyed;
  }

  send(frame: Frame): void {
    if (this.socket.destroyed || !this.socket.writable) throw new PeerClosed(`cannot send '${frame.type}': ${this.remote} is gone`);
    this.socket.write(encodeFrame(frame));
  }

  /** The next frame, validated against `schema`. Rejects with FrameTimeout, PeerClosed or ProtocolError. */
  async receive<T>(schema: z.ZodType<T>, timeoutMs: number): Promise<T> {
    const raw = await this.receiveRaw(timeoutMs);
    const r = check(schema, raw);
    if (!r.ok) throw new ProtocolError(r.reason);
    return r.frame;
  }

  /** Sends a request and waits for its reply. */
  async request<T>(frame: Frame, schema: z.ZodType<T>, timeoutMs: number): Promise<T> {
    this.send(frame);
    return this.receive(schema, timeoutMs);
  }

  receiveRaw(timeoutMs: number): Promise<unknown> {
    if (this.frames.length > 0) return Promise.resolve(this.frames.shift());
    if (this.ended) return Promise.reject(this.ended);
    if (this.waiter) return Promise.reject(new Error("two concurrent receives on one connection"));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        reject(new FrameTimeout(`no frame from ${this.remote} within ${Math.round(timeoutMs / 100) / 10}s`));
      }, timeoutMs);
      this.waiter = {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
    });
  }

  /** Half-closes after flushing what was sent, and destroys the socket shortly after. */
  close(): void {
    if (this.socket.destroyed) return;
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    if (this.waiter && this.frames.length > 0) {
      const w = this.waiter;
      this.waiter = null;
      w.resolve(this.frames.shift());
    }
  }

  private fail(err: Error): void {
    if (!this.ended) this.ended = err;
    if (this.waiter && this.frames.length === 0) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(this.ended);
    }
    // A framing error leaves the socket open so the owner can send its refusal before closing.
  }
}

/** Opens a connection; rejects with the OS error (ECONNREFUSED, ETIMEDOUT…) after `timeoutMs`. */
export function dial(host: string, port: number, timeoutMs: number): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const socket = netConnect({ host, port });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`connect timed out after ${timeoutMs / 1000}s`));
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.removeAllListeners("error");
      resolve(new Connection(socket));
    });
    socket.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

