// A strict reader of the Prometheus text format (0.0.4) for tests: it throws on anything a
// strict scraper would reject, so it checks the writer rather than trusting it.
import assert from "node:assert/strict";

export interface Family {
  type: string;
  help: string;
  samples: { labels: Record<string, string>; value: number }[];
}

/** Parses text format 0.0.4, throwing on anything a strict reader would reject. */
export function parseExposition(text: string): Map<string, Family> {
  assert.ok(text.endsWith("\n"), "the body ends with a newline");
  const families = new Map<string, Family>();
  const seen = new Set<string>();
  let current: string | null = null;
  const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
  text
    .slice(0, -1)
    .split("\n")
    .forEach((line, i) => {
      const where = `line ${i + 1}: ${line}`;
      let m: RegExpExecArray | null;
      if ((m = new RegExp(`^# HELP (${NAME}) (.*)$`).exec(line))) {
        assert.ok(!families.has(m[1]!), `${where}: HELP repeated`);
        const help = m[2]!.replace(/\\(.?)/g, (_s, c: string) => {
          assert.ok(c === "\\" || c === "n", `${where}: bad escape in HELP`);
          return c === "n" ? "\n" : c;
        });
        families.set(m[1]!, { type: "untyped", help, samples: [] });
        current = m[1]!;
        return;
      }
      if ((m = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`).exec(line))) {
        const f = families.get(m[1]!);
        assert.ok(f && current === m[1] && f.type === "untyped" && f.samples.length === 0, `${where}: TYPE must follow its HELP, once, before samples`);
        f.type = m[2]!;
        if (f.type === "counter") assert.match(m[1]!, /_total$/, `${where}: a counter's name ends in _total`);
        return;
      }
      assert.ok(!line.startsWith("#") && line.trim() !== "", `${where}: not a sample, HELP or TYPE line`);
      m = new RegExp(`^(${NAME})(\\{(.*)\\})? (\\S+)( -?\\d+)?$`).exec(line);
      assert.ok(m, `${where}: not a sample line`);
      const name = m[1]!;
      assert.equal(name, current, `${where}: a sample outside its family's block`);
      const labels: Record<string, string> = {};
      let rest = m[3] ?? "";
      while (rest !== "") {
        const l = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.exec(rest);
        assert.ok(l, `${where}: bad label syntax at '${rest}'`);
        assert.ok(!(l[1]! in labels), `${where}: label ${l[1]} repeated`);
        labels[l[1]!] = l[2]!.replace(/\\(["\\n])/g, (_s, c: string) => (c === "n" ? "\n" : c));
        rest = rest.slice(l[0].length);
      }
      const raw = m[4]!;
      assert.match(raw, /^(NaN|[+-]Inf|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$/, `${where}: bad value`);
      const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
      assert.ok(!seen.has(key), `${where}: series repeated`);
      seen.add(key);
      families.get(name)!.samples.push({ labels, value: raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : Number(raw) });
    });
  for (const [name, f] of families) assert.notEqual(f.type, "untyped", `${name} has no TYPE`);
  return families;
}

