// HOST:PORT on the command line (kept apart from the wire code so parsing a flag loads no schemas).
import { UsageError } from "../errors.ts";

/** Parses HOST:PORT (split at the last colon; IPv6 in brackets). */
export function parseHostPort(spec: string, flag = "--master"): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:]+|.+):(\d{1,5})$/.exec(spec.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || !m[1] || port < 1 || port > 65535) {
    throw new UsageError(`${flag} wants host:port (got '${spec}')`);
  }
  return { host: m[1].replace(/^\[(.*)\]$/, "$1"), port };
}
