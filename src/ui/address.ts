// `--ui [HOST:]PORT`: where the dashboard listens. A bare port listens on 127.0.0.1; port 0
// takes a free one (the banner names it).
import { UsageError } from "../errors.ts";

export interface UiAddress {
  host: string;
  port: number;
}

export const DEFAULT_UI_HOST = "127.0.0.1";

export function parseUiAddress(spec: string, flag = "--ui"): UiAddress {
  const text = spec.trim();
  const m = /^(?:(\[[^\]]+\]|[^:[\]]+):)?(\d{1,5})$/.exec(text);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !(port >= 0 && port <= 65535)) {
    throw new UsageError(`${flag} wants [HOST:]PORT, such as 8080, 127.0.0.1:8080 or 0.0.0.0:8080 (got '${spec}')`);
  }
  return { host: m[1] ? m[1].replace(/^\[(.*)\]$/, "$1") : DEFAULT_UI_HOST, port };
}
