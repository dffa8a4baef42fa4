// Test scaffolding for the dashboard: start a CLI command that serves it, learn its address
// from the banner, and fetch from it over 127.0.0.1.
import type { ChildProcess } from "node:child_process";
import { request } from "node:http";
import type { Campaign } from "../helpers/campaign.ts";

export interface Served {
  child: ChildProcess;
  /** The page's address, from the banner. */
  url: string;
  /** The one-time login link (off loopback), from what stdout holds when it is read: the banner's line after the address may come in a later write. */
  readonly loginUrl: string | null;
  /** Everything the command wrote to stdout so far. */
  stdout: () => string;
  stderr: () => string;
  done: Promise<number | null>;
}

/** Spawns `args` and waits for the banner line matching `banner` (its first group is the URL). */
export async function serve(c: Campaign, args: string[], banner: RegExp, env: NodeJS.ProcessEnv = {}): Promise<Served> {
  const child = c.spawn(args, env);
  let out = "";
  let err = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const done = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const end = Date.now() + 30_000;
  for (;;) {
    const m = banner.exec(out);
    if (m) {
      return {
        child,
        url: m[1]!,
        get loginUrl() {
          return /open (http:\/\/\S+\/login\/[0-9a-f]+)/.exec(out)?.[1] ?? null;
        },
        stdout: () => out,
        stderr: () => err,
        done,
      };
    }
    if (child.exitCode !== null || Date.now() > end) throw new Error(`no dashboard banner (exit ${child.exitCode})\nstdout:\n${out}\nstderr:\n${err}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request over 127.0.0.1, with the headers and method given (no redirects followed); `fresh`: on a connection of its own. */
export function get(url: string, o: { headers?: Record<string, string>; method?: string; body?: string; fresh?: boolean } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: o.method ?? "GET", headers: o.headers ?? {}, ...(o.fresh ? { agent: false } : {}) }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on("error", reject);
    req.end(o.body);
  });
}
