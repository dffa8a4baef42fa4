// The dashboard's web server: plain node:http, one page, its script and style, uPlot from the
// package's node_modules, a snapshot pushed over Server-Sent Events once a second, `/metrics`
// for Prometheus. Nothing is fetched from anywhere else, so it works offline.
//
// Who may look (docs/dashboard.md): bound to a loopback address (127.0.0.0/8, ::1, localhost),
// anyone on this host may, and the Host header must name a loopback host too (a page elsewhere
// cannot reach it by DNS rebinding). Bound to any other address (0.0.0.0 included, even when the
// request comes in over 127.0.0.1: the bind decides, since a proxy on this host forwards from
// loopback), every request needs a credential: the banner's one-time link (`/login/<nonce>`)
// sets an HttpOnly cookie named for this campaign and port and is used up; scrapers send
// `Authorization: Bearer` with the read-only scrape credential (credentials.ts) or the campaign
// token itself. Anything else gets 401, and its connection is closed.
//
// Bounded: connections without an authorized request have a pool, a cap and a deadline of their
// own, apart from the authenticated ones (connections.ts), so they cannot lock the owner out;
// GET and HEAD only (405), no request body (413), unknown paths 404, at most `maxClients` event
// streams (503 beyond), a stream whose reader stops reading is dropped, and the snapshot is taken
// once per interval whatever the number of clients.
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { tokensEqual } from "../core/handshake-checks.ts";
import { UsageError } from "../errors.ts";
import { randomHex } from "../util/random-hex.ts";
import { ConnectionPools } from "./connections.ts";
import { loginCookieName, removeWrittenFile, scrapeCredential, writeScrapeTokenFile, type WrittenFile } from "./credentials.ts";
import { METRICS_CONTENT_TYPE, writeMetrics } from "./metrics.ts";
import { CLIENT_JS, PAGE_CSS, pageHtml } from "./page.ts";
import type { DashboardSnapshot, DashboardSource } from "./source.ts";

export interface DashboardOptions {
  host: string;
  /** 0 = a free port. */
  port: number;
  source: DashboardSource;
  /** The campaign token; required off loopback. */
  token: string | null;
  /** How often a snapshot is pushed (ms, default 1000). */
  intervalMs?: number;
  /** Most event streams at once (default 16). */
  maxClients?: number;
  /** Most connections without an authorized request yet (default 64). */
  maxUnauthenticated?: number;
  /** Off loopback: the directory that holds the campaign's token file, where the scrape credential is kept while the dashboard serves; null: not kept. */
  scrapeTokenDir?: string | null;
  log?: (line: string) => void;
}

export interface Dashboard {
  /** The page's address (without any secret). */
  readonly url: string;
  /** Off loopback: the one-time link that logs a browser in; null on loopback. */
  readonly loginUrl: string | null;
  readonly port: number;
  /** Off loopback: the file that holds the read-only scrape credential; null when none was written. */
  readonly scrapeTokenFile: string | null;
  /** Event streams open now. */
  clients(): number;
  close(): Promise<void>;
}

/** How long a connection has for an authorized request, and an authenticated one for each later request (ms). */
const REQUEST_DEADLINE_MS = 10_000;
/** Connections that made an authorized request, beyond the event streams. */
const AUTHENTICATED_SPARE = 32;
/** Connections the kernel may hold accepted for us before one turn of the event loop takes them. */
const LISTEN_BACKLOG = 511;
/**
 * Connections without an authorized request yet. One turn of the loop accepts at most about a
 * backlog's worth, and a connection's request is read at the latest in the turn after its accept;
 * with room for two turns' worth, a flood pushes out only connections that had their chance to
 * speak, never one whose request has not been read yet.
 */
const UNAUTHENTICATED_CAP = 2 * LISTEN_BACKLOG + 2;
/** A stream that has this much unsent is a reader that stopped reading. */
const MAX_BACKLOG_BYTES = 4 << 20;

/** Whether `host` (as given to --ui) names a loopback address. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === "::ffff:127.0.0.1";
}

/** The uPlot files, read once from the installed package. */
function vendorFiles(): Map<string, { type: string; body: Buffer }> {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve("uplot/dist/uPlot.iife.min.js"));
  return new Map([
    ["/vendor/uPlot.iife.min.js", { type: "text/javascript; charset=utf-8", body: readFileSync(join(dir, "uPlot.iife.min.js")) }],
    ["/vendor/uPlot.min.css", { type: "text/css; charset=utf-8", body: readFileSync(join(dir, "uPlot.min.css")) }],
  ]);
}

export async function startDashboard(o: DashboardOptions): Promise<Dashboard> {
  const loopback = isLoopbackHost(o.host);
  if (!loopback && !o.token) throw new UsageError(`--ui ${o.host}:${o.port} is off loopback and needs the campaign token; none was found`);
  const log = o.log ?? (() => {});
  const intervalMs = o.intervalMs ?? 1000;
  const maxClients = o.maxClients ?? 16;
  const pools = new ConnectionPools({ unauthenticated: o.maxUnauthenticated ?? UNAUTHENTICATED_CAP, authenticated: maxClients + AUTHENTICATED_SPARE, deadlineMs: REQUEST_DEADLINE_MS });
  const scrape = loopback ? null : scrapeCredential(o.token!);
  // Named once the port is known: two dashboards on one host keep their own logins.
  let cookieName = "";
  const cookieSecret = randomHex(32);
  let loginNonce: string | null = loopback ? null : randomHex(24);
  const files = new Map<string, { type: string; body: Buffer }>([
    ["/", { type: "text/html; charset=utf-8", body: Buffer.from(pageHtml({ title: "fuzzfleet", embedded: null })) }],
    ["/app.js", { type: "text/javascript; charset=utf-8", body: Buffer.from(CLIENT_JS) }],
    ["/app.css", { type: "text/css; charset=utf-8", body: Buffer.from(PAGE_CSS) }],
    ...vendorFiles(),
  ]);
  const streams = new Set<ServerResponse>();
  let cached: { at: number; json: string } | null = null;
  let sourceBroken = false;

  /** The snapshot as JSON, taken at most once per interval. */
  const snapshotJson = (): string => {
    const now = Date.now();
    if (cached && now - cached.at < intervalMs / 2) return cached.json;
    try {
      const snap: DashboardSnapshot = o.source.snapshot();
      cached = { at: now, json: JSON.stringify(snap) };
      sourceBroken = false;
    } catch (err) {
      if (!sourceBroken) log(`dashboard: the snapshot failed: ${(err as Error).message}`);
      sourceBroken = true;
      if (!cached) throw err;
    }
    return cached.json;
  };

  const authorized = (req: IncomingMessage): boolean => {
    if (loopback) return isLoopbackHost(hostOf(req.headers.host ?? ""));
    // The scheme is case-insensitive (RFC 9110 §11.1).
    const bearer = /^bearer +(\S+) *$/i.exec(req.headers.authorization ?? "")?.[1];
    if (bearer !== undefined && (tokensEqual(bearer, scrape!) || tokensEqual(bearer, o.token!))) return true;
    const cookie = parseCookies(req.headers.cookie)[cookieName];
    return cookie !== undefined && tokensEqual(cookie, cookieSecret);
  };

  const handle = (req: IncomingMessage, res: ServerResponse): void => {
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Cache-Control", "no-store");
    res.setHeader("Referrer-Policy", "no-referrer");
    const socket = req.socket as Socket;
    res.once("close", pools.begin(socket));
    if (authorized(req) && !pools.authenticate(socket)) {
      return refuse(res, 503, "the dashboard has no room for another connection: every one is busy; retry shortly", true);
    }
    // Whoever has not shown a credential gets one answer per connection.
    if (!pools.isAuthenticated(socket)) res.setHeader("Connection", "close");
    const hasBody = (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0") || req.headers["transfer-encoding"] !== undefined;
    if (hasBody) return refuse(res, 413, "the dashboard accepts no request body", true);
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.setHeader("Allow", "GET, HEAD");
      return refuse(res, 405, `method ${req.method} is not served; only GET and HEAD`);
    }
    if (loopback && !isLoopbackHost(hostOf(req.headers.host ?? ""))) return refuse(res, 403, "this dashboard serves only loopback host names");
    const path = (req.url ?? "/").split("?")[0]!;
    const login = /^\/login\/([0-9a-f]{48})$/.exec(path);
    if (login) {
      if (loginNonce === null || !tokensEqual(login[1]!, loginNonce)) return refuse(res, 403, "this login link was used already or is not this dashboard's; restart the campaign for a new one, or send Authorization: Bearer <scrape credential> (the file its banner names)");
      loginNonce = null;
      res.setHeader("Set-Cookie", `${cookieName}=${cookieSecret}; HttpOnly; SameSite=Strict; Path=/`);
      res.setHeader("Location", "/");
      res.writeHead(303).end();
      return;
    }
    if (!authorized(req)) {
      res.setHeader("WWW-Authenticate", 'Bearer realm="fuzzfleet"');
      return refuse(res, 401, "this dashboard listens off loopback: open the one-time link its banner printed, or send Authorization: Bearer <scrape credential> (the file its banner names)");
    }
    const file = files.get(path);
    if (file) return send(res, req, 200, file.type, file.body);
    if (path === "/snapshot.json") return send(res, req, 200, "application/json", Buffer.from(snapshotJson()));
    if (path === "/metrics") return send(res, req, 200, METRICS_CONTENT_TYPE, Buffer.from(writeMetrics(o.source.metrics())));
    const detail = /^\/failure\/(\d{1,12})$/.exec(path);
    if (detail) {
      const d = o.source.failureDetail(Number(detail[1]));
      return d ? send(res, req, 200, "application/json", Buffer.from(JSON.stringify(d))) : refuse(res, 404, `no failure #${detail[1]}`);
    }
    if (path === "/events") {
      if (streams.size >= maxClients) return refuse(res, 503, `at most ${maxClients} dashboard streams at once; close a tab`);
      res.writeHead(200, { "Content-Type": "text/event-stream", Connection: "keep-alive" });
      streams.add(res);
      res.on("close", () => streams.delete(res));
      push(res, snapshotJson());
      return;
    }
    refuse(res, 404, `no such page: ${path.slice(0, 100)}`);
  };

  const push = (res: ServerResponse, json: string): void => {
    if (res.writableLength > MAX_BACKLOG_BYTES) {
      res.destroy();
      streams.delete(res);
      return;
    }
    res.write(`event: snapshot\ndata: ${json}\n\n`);
  };

  const timer = setInterval(() => {
    if (streams.size === 0) return;
    let json: string;
    try {
      json = snapshotJson();
    } catch {
      return;
    }
    for (const res of streams) push(res, json);
  }, intervalMs);
  timer.unref();

  // Node's own deadlines cover an authenticated connection's later requests; checked every second, not every 30.
  const server: Server = createServer({ requestTimeout: REQUEST_DEADLINE_MS, headersTimeout: REQUEST_DEADLINE_MS, connectionsCheckingInterval: 1000, maxHeaderSize: 8192 }, (req, res) => {
    try {
      handle(req, res);
    } catch (err) {
      log(`dashboard: ${req.url?.slice(0, 100)}: ${(err as Error).message}`);
      if (!res.headersSent) refuse(res, 500, "the campaign could not be read just now; retry");
      else res.destroy();
    }
  });
  server.on("connection", (socket: Socket) => pools.accept(socket));
  await new Promise<void>((resolve, reject) => {
    server.once("error", (err: NodeJS.ErrnoException) =>
      reject(new UsageError(`--ui ${o.host}:${o.port}: cannot listen (${err.code ?? err.message}); choose another port, or 0 for a free one`, { cause: err })),
    );
    server.listen({ port: o.port, host: o.host, backlog: LISTEN_BACKLOG }, () => resolve());
  });
  server.on("error", (err) => log(`dashboard: ${err.message}`));
  const port = (server.address() as AddressInfo).port;
  const shownHost = o.host.includes(":") ? `[${o.host}]` : o.host === "0.0.0.0" ? "127.0.0.1" : o.host;
  const url = `http://${shownHost}:${port}/`;
  if (!loopback) cookieName = loginCookieName(o.token!, port);
  let scrapeFile: WrittenFile | null = null;
  if (scrape !== null && o.scrapeTokenDir) {
    try {
      scrapeFile = writeScrapeTokenFile(o.scrapeTokenDir, scrape);
    } catch (err) {
      log(`dashboard: cannot keep the scrape credential in ${o.scrapeTokenDir} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); scrapers send the campaign token instead`);
    }
  }
  return {
    url,
    loginUrl: loginNonce ? `${url}login/${loginNonce}` : null,
    port,
    scrapeTokenFile: scrapeFile?.path ?? null,
    clients: () => streams.size,
    close: async () => {
      clearInterval(timer);
      if (scrapeFile) removeWrittenFile(scrapeFile);
      for (const res of streams) res.end();
      streams.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        pools.closeAll();
        server.closeAllConnections();
      });
    },
  };
}

/** The banner's lines on how to get in off loopback: the one-time link, and where scrapers find their credential. */
export function accessLines(d: Dashboard): string[] {
  const lines: string[] = [];
  if (d.loginUrl) lines.push(`  off loopback: open ${d.loginUrl} once to log this browser in`);
  if (d.scrapeTokenFile) lines.push(`  scrapers (Prometheus): send Authorization: Bearer <the read-only credential in ${d.scrapeTokenFile}>; it cannot join the campaign`);
  else if (d.loginUrl) lines.push("  scrapers (Prometheus): send Authorization: Bearer <campaign token>");
  return lines;
}

function send(res: ServerResponse, req: IncomingMessage, status: number, type: string, body: Buffer): void {
  res.writeHead(status, { "Content-Type": type, "Content-Length": body.length, ...(type.startsWith("text/html") ? { "Content-Security-Policy": CSP } : {}) });
  res.end(req.method === "HEAD" ? undefined : body);
}

const CSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function refuse(res: ServerResponse, status: number, why: string, closeAfter = false): void {
  const body = Buffer.from(`${why}\n`);
  res.writeHead(status, { "Content-Type": "text/plain; charset=utf-8", "Content-Length": body.length, ...(closeAfter ? { Connection: "close" } : {}) });
  res.end(body);
}

function hostOf(hostHeader: string): string {
  const m = /^(\[[^\]]*\]|[^:]*)(?::\d+)?$/.exec(hostHeader.trim());
  return m ? m[1]! : "";
}

function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (header ?? "").split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0) out[part.slice(0, eq).trim()] = part.slice(eq + 1).trim();
  }
  return out;
}
