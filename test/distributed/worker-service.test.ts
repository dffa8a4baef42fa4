// The worker service `coordinate` and `explore` share, seen from the compiled CLI: one wording for
// a port that cannot be had, and explore's stop of its workers bounded by --stop-grace, with the
// signal handling of the command line (first Ctrl-C stops, the second is only told it is under way).
import assert from "node:assert/strict";
import { createServer, type AddressInfo, type Server } from "node:net";
import { test } from "node:test";
import { Campaign, CLI, distributedTable, waitFor } from "../helpers/campaign.ts";
import { ExploreDir } from "../helpers/explore.ts";
import { fakeWorker, send } from "../helpers/wire.ts";
import { spawnSync } from "node:child_process";

const TOKEN = "service-test-token-0123456789";

function holdPort(): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve({ server, port: (server.address() as AddressInfo).port }));
  });
}

test("coordinate and explore refuse a port in use with one message naming the address and the fix (exit 4)", async () => {
  const { server, port } = await holdPort();
  const c = new Campaign({ extra: distributedTable() });
  const e = new ExploreDir();
  try {
    const coord = c.cli(["coordinate", "--for", "20s", "--port", String(port)]);
    const master = e.run(["--port", String(port), "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "1"], ["/bin/true"]);
    const words = `could not listen on 127.0.0.1:${port}: the port is in use (another coordinator or explore master, or another program); pass another`;
    assert.equal(coord.code, 4, coord.stdout + coord.stderr);
    assert.match(coord.stderr, new RegExp(`^fuzzfleet: ${escape(words)} --port \\(or \\[distributed\\] port in the config\\), or 0 for a free one\\n`));
    assert.equal(master.code, 4, master.stdout + master.stderr);
    assert.match(master.stderr, new RegExp(`^fuzzfleet: ${escape(words)} --port, or 0 for a free one\\n`));
    assert.doesNotMatch(coord.stdout + master.stdout, /listening on/);
  } finally {
    server.close();
    c.cleanup();
    e.cleanup();
  }
});

test("explore gives a worker that does not acknowledge the stop --stop-grace, names it with that grace, and exits 70; a second Ctrl-C is only told", { timeout: 120_000 }, async () => {
  const e = new ExploreDir();
  try {
    const master = e.start(["-j", "0", "--port", "0", "--bind", "127.0.0.1", "--token", TOKEN, "--max-idle", "60", "--stop-grace", "2"], ["/bin/true"]);
    const port = await master.port();
    assert.match(master.output(), new RegExp(`start workers:  fuzzfleet worker --master 127\\.0\\.0\\.1:${port} --token ${TOKEN} -j 1\\n`));
    const mute = await fakeWorker(port, TOKEN, "mute");
    await waitFor("the worker to be admitted", () => (/worker mute#\d+ joined/.test(master.output()) ? true : undefined));
    master.child.kill("SIGINT");
    // It is asked to stop on its next request, and never answers the stop.
    let stop: { type: string; token?: string } | null = null;
    while (!stop) {
      const reply = (await send(mute.conn, { type: "heartbeat", ids: [] })) as { type: string; token?: string };
      if (reply.type === "stop") stop = reply;
      else await new Promise((r) => setTimeout(r, 100));
    }
    assert.match(stop.token!, /^[0-9a-f]{32}$/);
    master.child.kill("SIGINT");
    const r = await master.done;
    const out = master.output();
    assert.equal(r.code, 70, out);
    assert.match(out, /^Ctrl-C: stopping — local executions are stopped and requeued/m);
    assert.match(out, /^SIGINT: already stopping \(every wait is bounded\)$/m);
    assert.equal(out.split("stopping —").length - 1, 1, "the stop began once");
    assert.match(out, new RegExp(`worker shutdown: 0 of 1 worker\\(s\\) acknowledged the stop`));
    assert.match(out, new RegExp(`campaign incomplete \\(1 problem\\(s\\)\\):\\n  worker mute#${mute.workerId} did not acknowledge the stop within 2s\\n`));
    mute.conn.destroy();
  } finally {
    e.cleanup();
  }
});

test("explore --help documents --stop-grace and its default, the sweep's stop grace", () => {
  const r = spawnSync(process.execPath, [CLI, "explore", "--help"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  // commander wraps the help to the terminal's width: compare it with the line breaks undone.
  const help = r.stdout.replace(/\s+/g, " ");
  assert.match(help, /--stop-grace <sec> at the end, how long remote workers have to acknowledge the stop \(as a sweep's stop_grace_seconds\) \(default: 15\)/);
  assert.match(help, /has --stop-grace seconds to finish its runs, clean up and acknowledge exactly; one that does not is named \(exit 70\)/);
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
