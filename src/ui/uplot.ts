// uPlot's script and stylesheet read from the installed package, for a static page (a report)
// that loads nothing from anywhere; both campaign kinds' reports inline them.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** uPlot's script and stylesheet, to inline in a page that loads nothing from anywhere. */
export function inlinedUplot(): { uplotJs: string; uplotCss: string } {
  const uplot = dirname(createRequire(import.meta.url).resolve("uplot/dist/uPlot.iife.min.js"));
  return { uplotJs: readFileSync(join(uplot, "uPlot.iife.min.js"), "utf8"), uplotCss: readFileSync(join(uplot, "uPlot.min.css"), "utf8") };
}
