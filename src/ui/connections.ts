// The dashboard's connections, kept in two pools with caps of their own, so that nobody without
// the credential can crowd out the dashboard's owner (docs/dashboard.md, "Limits"):
//
//   accepted ──(an authorized request)──► authenticated ──(closed)──► gone
//      └──(its deadline, pushed out by a newer one, answered without authorization, closed)──► gone
//
// - An accepted connection is *unauthenticated* until one of its requests is authorized (on
//   loopback every request is). It has `deadlineMs` from its accept to make one, else it is
//   answered 408 and closed, whatever it is sending; its answers close it. When the cap of them
//   (`limits.unauthenticated`) is open and another one arrives, the oldest is closed: a flood of new
//   connections pushes out the slow ones, and a new connection always gets its turn.
// - An authorized request moves its connection to the *authenticated* pool, event streams
//   included. When that pool is full, its oldest idle connection (no request in flight, no event
//   stream) is closed to make room; when none is idle the request is refused (the caller answers
//   503). Its later requests have Node's own header and request deadlines.
// Both pools together bound the sockets, and with the header size cap the memory, at any time.
import type { Socket } from "node:net";

export interface ConnectionLimits {
  /** Connections without an authorized request yet. */
  unauthenticated: number;
  /** Connections that made one, event streams included. */
  authenticated: number;
  /** How long an unauthenticated connection has to make an authorized request (ms). */
  deadlineMs: number;
}

interface Conn {
  /** Requests of this connection whose answer is not finished (an event stream stays in flight). */
  inFlight: number;
  deadline: NodeJS.Timeout | null;
}

const TIMEOUT_BODY = "no complete, authorized request within the deadline; reconnect\n";
const REQUEST_TIMEOUT_ANSWER = `HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(TIMEOUT_BODY)}\r\n\r\n${TIMEOUT_BODY}`;
/** A connection closed with an answer gets this long to take it before it is cut. */
const LINGER_MS = 1000;

export class ConnectionPools {
  /** In order of arrival: the first is the oldest. */
  private readonly waiting = new Map<Socket, Conn>();
  private readonly trusted = new Map<Socket, Conn>();

  constructor(private readonly limits: ConnectionLimits) {}

  /** A new connection: counted as unauthenticated, the oldest such one closed if there is no room. */
  accept(socket: Socket): void {
    while (this.waiting.size >= this.limits.unauthenticated) {
      const [oldest] = this.waiting.keys();
      this.forget(oldest!);
      oldest!.destroy();
    }
    const conn: Conn = { inFlight: 0, deadline: null };
    conn.deadline = setTimeout(() => this.expire(socket), this.limits.deadlineMs);
    conn.deadline.unref();
    this.waiting.set(socket, conn);
    socket.once("close", () => this.forget(socket));
  }

  isAuthenticated(socket: Socket): boolean {
    return this.trusted.has(socket);
  }

  /**
   * An authorized request arrived on `socket`: moves it to the authenticated pool, closing that
   * pool's oldest idle connection if it is full. False when there is no room (nothing idle).
   */
  authenticate(socket: Socket): boolean {
    if (this.trusted.has(socket)) return true;
    const conn = this.waiting.get(socket);
    if (!conn) return false;
    if (this.trusted.size >= this.limits.authenticated) {
      const idle = [...this.trusted].find(([, c]) => c.inFlight === 0);
      if (!idle) return false;
      this.forget(idle[0]);
      idle[0].destroy();
    }
    this.waiting.delete(socket);
    clearTimeout(conn.deadline!);
    conn.deadline = null;
    this.trusted.set(socket, conn);
    return true;
  }

  /** A request's answer began on `socket`; `finished` is called when it is over. */
  begin(socket: Socket): () => void {
    const conn = this.waiting.get(socket) ?? this.trusted.get(socket);
    if (!conn) return () => {};
    conn.inFlight++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      conn.inFlight--;
    };
  }

  /** Closes every connection (the server stops). */
  closeAll(): void {
    for (const socket of [...this.waiting.keys(), ...this.trusted.keys()]) {
      this.forget(socket);
      socket.destroy();
    }
  }

  private expire(socket: Socket): void {
    const conn = this.waiting.get(socket);
    if (!conn) return;
    this.forget(socket);
    // An answer already under way is cut rather than interleaved with the 408.
    if (conn.inFlight > 0 || socket.destroyed) return void socket.destroy();
    socket.end(REQUEST_TIMEOUT_ANSWER);
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
  }

  private forget(socket: Socket): void {
    const conn = this.waiting.get(socket) ?? this.trusted.get(socket);
    if (conn?.deadline) clearTimeout(conn.deadline);
    this.waiting.delete(socket);
    this.trusted.delete(socket);
  }
}
