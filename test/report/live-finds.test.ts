// Finds as they appear: while a chunk runs, the live console's "finds so far" and the dashboard's
// chunk in flight count the failure entries its generator has written so far, before the chunk is
// booked — for a generator that writes one failure and then waits, and for the bundled planted
// generator, which writes its failures batch by batch.
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import type { DashboardSnapshot } from "../../src/ui/source.ts";
import { exitOwed } from "../helpers/books.ts";
import { Campaign, exited, waitFor } from "../helpers/campaign.ts";
import { get, serve } from "../ui/serve.ts";

/** Writes one failure entry for its first seed, then waits until `release` exists and exits 1 (a find). Later chunks exit 0 at once. */
const WRITES_THEN_WAITS = `
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
const [out, from, , release] = process.argv.slice(2);
if (from !== "1") process.exit(0);
const dir = join(out, "failures", from);
mkdirSync(dir, { recursive: true });
writeFileSync(join(dir, "input.min.txt"), "the failing test\\n");
writeFileSync(join(dir, "meta.json"), JSON.stringify({ seed: 1, bucket: "crash", shrunk: true, msg: "found early", key_file: "input.min.txt" }));
const poll = setInterval(() => {
  if (!existsSync(release)) return;
  clearInterval(poll);
  process.exitCode = 1;
}, 50);
`;

describe("a generator that writes a failure and then waits", () => {
  const c = new Campaign({ defaults: { bootstrap_seeds: 10 } });
  const script = join(c.dir, "writes-then-waits.mjs");
  const release = join(c.dir, "release");
  writeFileSync(script, WRITES_THEN_WAITS);
  c.writeConfig({
    defaults: { bootstrap_seeds: 10 },
    generator: `[generator]
command = ["node", ${JSON.stringify(script)}, "{out}", "{seed_from}", "{seed_to}", ${JSON.stringify(release)}]
identity = [${JSON.stringify(script)}]
`,
  });
  after(() => c.cleanup());

  test("the console and the dashboard show 1 find so far before the chunk ends", async () => {
    const s = await serve(c, ["run", "--for", "60s", "--status-every", "1s", "--ui", "127.0.0.1:0"], /dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/);
    const ended = exited(s.child);
    try {
      await waitFor("a status line with 1 find so far in the running chunk", () => (/status: small 1\.\.10 .*finds so far 1 \|/.test(s.stdout()) ? true : undefined), 30_000);
      const snap = JSON.parse((await get(`${s.url}snapshot.json`)).body) as DashboardSnapshot;
      const flights = snap.sweep!.lanes.flatMap((l) => l.inFlight);
      assert.deepEqual(
        flights.map((f) => ({ seedFrom: f.seedFrom, seedTo: f.seedTo, findsSoFar: f.findsSoFar })),
        [{ seedFrom: 1, seedTo: 10, findsSoFar: 1 }],
        "the dashboard's chunk in flight counts the entry written so far",
      );
      assert.equal(snap.sweep!.totals.finds, 0, "nothing is booked before the chunk ends");
      assert.doesNotMatch(s.stdout(), /clean, 1 find/, "the chunk has not landed yet");
      writeFileSync(release, "");
      await waitFor("the chunk to land with its find", () => (/^ +9 clean, 1 find, 1 new in /m.test(s.stdout()) ? true : undefined), 30_000);
    } finally {
      if (!existsSync(release)) writeFileSync(release, "");
      s.child.kill("SIGINT");
    }
    const end = await ended;
    const out = s.stdout() + s.stderr();
    assert.equal(end.code, exitOwed(c, out), out);
  });
});

describe("the bundled planted generator", () => {
  // 2,500 seeds at 2 ms each: about 5 s for the first chunk, its failures written every 256 seeds.
  const c = new Campaign({ costMs: 2, defaults: { bootstrap_seeds: 2500 } });
  after(() => c.cleanup());

  test("its first chunk's failures are counted as they are written, not all at its end", async () => {
    const s = c.spawn(["run", "--for", "60s", "--status-every", "1s"]);
    const ended = exited(s);
    let out = "";
    s.stdout!.on("data", (d: Buffer | string) => (out += d.toString()));
    try {
      const landed = await waitFor("the first chunk to land", () => /^ +[\d,]+ clean, ([\d,]+) finds?,/m.exec(out) ?? undefined, 30_000);
      const total = Number(landed[1]!.replace(/,/g, ""));
      const shown = [...out.slice(0, landed.index).matchAll(/status: small 1\.\.2,500 .*finds so far ([\d,]+) \|/g)].map((m) => Number(m[1]!.replace(/,/g, "")));
      assert.ok(
        shown.some((n) => n > 0 && n < total),
        `a status line while the first chunk ran showed some of its ${total} finds, not none or all (${shown.join(", ")}):\n${out}`,
      );
    } finally {
      s.kill("SIGINT");
    }
    const end = await ended;
    assert.equal(end.code, exitOwed(c, out), out);
  });
});
