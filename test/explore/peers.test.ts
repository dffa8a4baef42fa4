// The master join's driver (explore/fleet/peers.ts) over real sockets on 127.0.0.1: a RootHub
// behind a plain listener (the worker server's token check is its own test's) and submasters
// joining with joinRoot, reading the root with readRoot. It checks what only the driver does:
// the frames reach the other side, the roster wait ends when the last master joins, the
// refusals and failures reach the submaster as the right error, a lost link is reported.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { RefusedError, RuntimeFailure } from "../../src/errors.ts";
import type { ExploreMaster } from "../../src/explore/master/master.ts";
import { joinRoot, peerHello, readRoot, RootHub, setupHash, type CampaignSetup, type JoinedRoot, type PeerLink } from "../../src/explore/fleet/peers.ts";
import { participantStats, rootStats, type Inbox } from "../../src/explore/fleet/stats-round.ts";
import { Connection } from "../../src/net/connection.ts";
import { FIRST_FRAME_BYTES } from "../../src/net/frame.ts";
import { check, PeerHello, type FromPeerT, type FromRootT } from "../../src/net/messages.ts";

const TEST = { timeout: 30_000 };
const TOKEN = "peers-test-token-0123456789";
const EPOCH = "a".repeat(64);
const dir = mkdtempSync(join(tmpdir(), "fuzzfleet-peers-"));
const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
  rmSync(dir, { recursive: true, force: true });
});

const SETUP: CampaignSetup = {
  corpus_dir: "/shared/corpus",
  input_dir: "/shared/in",
  target: ["/bin/true", "@@"],
  target_build: "0123456789ab",
  timeout_seconds: 5,
  max_idle_seconds: 1,
  simulate: false,
  max_children: 100,
  max_result_bytes: 1 << 20,
  max_input_bytes: 1 << 20,
  lease_ttl_seconds: 20,
  ownership: "rendezvous",
};

interface Root {
  hub: RootHub;
  port: number;
  lines: string[];
  frames: { rank: number; frame: FromPeerT }[];
  lost: { rank: number; why: string }[];
}

/** A root of `masters` masters listening on 127.0.0.1; its nonce is "the-nonce", its nonce file holds `nonceOnDisk`. */
async function root(masters: number, o: { graceMs?: number; nonceOnDisk?: string; inbox?: Inbox } = {}): Promise<Root> {
  const noncePath = join(dir, `nonce-${servers.length}`);
  writeFileSync(noncePath, o.nonceOnDisk ?? "the-nonce\n");
  const r: Root = { hub: null as unknown as RootHub, port: 0, lines: [], frames: [], lost: [] };
  r.hub = new RootHub({
    token: TOKEN,
    masters,
    setup: SETUP,
    nonce: { path: noncePath, value: "the-nonce" },
    epoch: EPOCH,
    graceMs: o.graceMs ?? 10_000,
    log: (line) => r.lines.push(line),
    // With an inbox, frames go there, as the explore command's roles wire them for the statistics round.
    onFrame: (peer: PeerLink, frame) => (o.inbox ? o.inbox.push({ rank: peer.rank, frame }) : r.frames.push({ rank: peer.rank, frame })),
    onLost: (peer, why) => r.lost.push({ rank: peer.rank, why }),
  });
  const server = createServer(async (socket) => {
    const conn = new Connection(socket, { firstFrameBytes: FIRST_FRAME_BYTES });
    const first = check(PeerHello, await conn.receiveRaw(5_000));
    assert.ok(first.ok, "the submaster's first frame is a peer_hello");
    conn.authenticated();
    await r.hub.accept(conn, first.frame);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port: 0 }, resolve));
  r.port = (server.address() as AddressInfo).port;
  return r;
}

function submaster(port: number, o: { setup?: CampaignSetup; joinTimeoutMs?: number; rank?: number } = {}): Promise<JoinedRoot> {
  return joinRoot({
    rank: o.rank ?? null,
    host: "127.0.0.1",
    port,
    token: TOKEN,
    setup: o.setup ?? SETUP,
    waitSeconds: 5,
    joinTimeoutMs: o.joinTimeoutMs ?? 20_000,
    signal: new AbortController().signal,
    log: () => undefined,
  });
}

/** Resolves once `pred` holds, looking every 10 ms; bounded by the test's timeout. */
async function until(pred: () => boolean): Promise<void> {
  while (!pred()) await new Promise((r) => setTimeout(r, 10));
}

test("three masters: the roster reaches both submasters once the last joins; frames flow both ways; a closed link is lost by rank", TEST, async () => {
  const r = await root(3);
  const started = r.hub.start(60_000);
  const [a, b] = await Promise.all([submaster(r.port), submaster(r.port), started]);
  assert.deepEqual([a!.rank, b!.rank].sort(), [1, 2]);
  for (const j of [a!, b!]) {
    assert.equal(j.epoch, EPOCH);
    assert.deepEqual(j.ranks, [0, 1, 2]);
  }
  assert.deepEqual(r.hub.peers.map((p) => p.rank).sort(), [1, 2]);
  assert.equal(r.lines.filter((l) => /^master .+ joined as rank [12] \([23] of 3\)$/.test(l)).length, 2, r.lines.join("\n"));

  const heard: FromRootT[] = [];
  void readRoot(a!.conn, 10_000, (f) => heard.push(f), () => undefined);
  r.hub.broadcast({ type: "status", rank: 0, sequence: 1, idle: true }, [a!.rank]);
  await until(() => heard.length === 1);
  assert.deepEqual(heard, [{ type: "status", rank: 0, sequence: 1, idle: true }]);

  b!.conn.send({ type: "abandon", rank: b!.rank, reason: "disk full\n" });
  await until(() => r.frames.length === 1);
  assert.deepEqual(r.frames, [{ rank: b!.rank, frame: { type: "abandon", rank: b!.rank, reason: "disk full\\x0a" } }]);
  b!.conn.destroy();
  await until(() => r.lost.length === 1);
  assert.deepEqual(r.lost, [{ rank: b!.rank, why: "connection closed" }]);
  a!.conn.destroy();
  r.hub.close();
});

test("a submaster with another setup is refused by name of the difference, as a RefusedError; the root logs it", TEST, async () => {
  const r = await root(2);
  const other = { ...SETUP, timeout_seconds: 9 };
  assert.notEqual(setupHash(other), setupHash(SETUP));
  await assert.rejects(submaster(r.port, { setup: other }), (err: Error) => {
    assert.ok(err instanceof RefusedError, `${err.constructor.name}: ${err.message}`);
    assert.equal(err.message, "the root master refused this master:\n  the campaign setup differs — timeout_seconds: root 5, this master 9");
    return true;
  });
  await until(() => r.lines.some((l) => l.includes("REFUSED master")));
  assert.match(r.lines.join("\n"), /REFUSED master 127\.0\.0\.1:\d+ — the campaign setup differs — timeout_seconds: root 5, this master 9/);
  r.hub.close();
});

test("a submaster that reads another nonce is refused, told to mount the corpus directory at the same path", TEST, async () => {
  const r = await root(2, { nonceOnDisk: "another-nonce\n" });
  await assert.rejects(submaster(r.port), (err: Error) => {
    assert.ok(err instanceof RefusedError, `${err.constructor.name}: ${err.message}`);
    assert.match(err.message, /the master cannot read the nonce at .*nonce-\d+: every master must mount the corpus directory at the same path$/);
    return true;
  });
  r.hub.close();
});

test("a root whose submaster never joins fails at the join timeout; a submaster that gets no roster fails at its own", TEST, async () => {
  const lonely = await root(2);
  await assert.rejects(lonely.hub.start(1_000), (err: Error) => {
    assert.ok(err instanceof RuntimeFailure);
    assert.equal(err.message, "only 1 of 2 masters joined within 1s; start the others with --join, or lower --masters");
    return true;
  });
  lonely.hub.close();
  // A root of three that has not started its wait: it seats the submaster and sends nothing more.
  const r = await root(3);
  await assert.rejects(submaster(r.port, { joinTimeoutMs: 1_000 }), (err: Error) => {
    assert.ok(err instanceof RuntimeFailure && !(err instanceof RefusedError));
    assert.equal(err.message, "the root master sent no roster within 1s (are all --masters started?)");
    return true;
  });
  assert.equal(r.hub.peers.length, 1, "the root had seated it");
  r.hub.close();
});

test("a seated submaster that says nothing after the roster is lost once the grace runs out", TEST, async () => {
  const r = await root(2, { graceMs: 1_000 });
  const [a] = await Promise.all([submaster(r.port), r.hub.start(20_000)]);
  await until(() => r.lost.length === 1);
  assert.deepEqual(r.lost, [{ rank: 1, why: "silent for more than 1s" }]);
  assert.ok(r.hub.peers[0]!.lost);
  a.conn.destroy();
  r.hub.close();
});

/**
 * What the statistics round reads of a master: its counters, its external inputs, and its lease
 * table (not partitioned here), whose done records it counts: `observations` of them, together
 * generating `generated`.
 */
function counts(observations: number, generated: number): ExploreMaster {
  const done = Array.from({ length: observations }, (_, i) => ({ status: "done", commit: { worker: "w", num_generated: i === 0 ? generated : 0 } }));
  return { counters: { observations, generated, claimedChildren: 1 }, external: new Set(), leaseTable: { partition: null, snapshot: () => done } } as unknown as ExploreMaster;
}

// Every wait of the round is 20 s: the test's 10 s bound fails a round that waits for its deadline instead of being woken by the frames.
test("the statistics round over the links: the root totals every master's counts, the submaster is acknowledged and released, each wait woken by the frame it waits for", { timeout: 10_000 }, async () => {
  const inbox: { root: Inbox; sub: Inbox } = { root: [], sub: [] };
  const r = await root(2, { graceMs: 20_000, inbox: inbox.root });
  const [sub] = await Promise.all([submaster(r.port), r.hub.start(20_000)]);
  let lost: string | null = null;
  void readRoot(sub.conn, 20_000, (f) => inbox.sub.push({ rank: 0, frame: f }), (why) => (lost = why));
  const now = () => performance.now();
  const [rootOut, subOut] = await Promise.all([
    rootStats({ hub: r.hub, master: counts(5, 7), late: 0, graceMs: 20_000, inbox: inbox.root, now, log: (l) => r.lines.push(l), executors: { local_slots: 2, remote_workers: 1 } }).then((out) => {
      r.hub.broadcast({ type: "release", token: EPOCH });
      return out;
    }),
    participantStats({ conn: sub.conn, rank: sub.rank, master: counts(3, 4), late: 2, graceMs: 20_000, finalizeMs: 20_000, inbox: inbox.sub, lost: () => lost, log: () => undefined, executors: { local_slots: 3, remote_workers: 4 } }),
  ]);
  assert.deepEqual(rootOut.problems, []);
  assert.deepEqual(rootOut.totals, { observations: 8, generated: 11, interesting: 2, external: 0, late: 2, local_slots: 5, remote_workers: 5 });
  assert.deepEqual(rootOut.executors, { local_slots: 5, remote_workers: 5 }, "every slot and worker of both masters");
  assert.deepEqual(rootOut.byMaster, { 0: 5, 1: 3 });
  assert.deepEqual(subOut, { problems: [], timedOut: false });
  sub.conn.destroy();
  r.hub.close();
});

// A launched submaster asks for its launcher rank in peer_hello; the wire's schema must have the
// field (net/messages.ts: PeerHello's optional `rank`) for the root to see it.
test("masters that ask for ranks get them whatever the join order; a second asking for one is refused by name", TEST, async () => {
  const r = await root(4);
  const started = r.hub.start(60_000);
  const later = (ms: number, rank: number) => new Promise((res) => setTimeout(res, ms)).then(() => submaster(r.port, { rank }));
  const [m3, m1, m2] = await Promise.all([submaster(r.port, { rank: 3 }), later(150, 1), later(300, 2), started]);
  assert.deepEqual([m3!.rank, m1!.rank, m2!.rank], [3, 1, 2]);
  assert.deepEqual(r.lines.filter((l) => / joined as rank /.test(l)).map((l) => /rank (\d)/.exec(l)![1]), ["3", "1", "2"], "seated in join order, each at its own rank");

  const q = await root(3);
  const roster = q.hub.start(60_000);
  const first = submaster(q.port, { rank: 1 });
  await until(() => q.lines.some((l) => / joined as rank 1/.test(l)));
  await assert.rejects(submaster(q.port, { rank: 1 }), (err: Error) => err instanceof RefusedError && /rank 1 is held already/.test(err.message));
  await assert.rejects(submaster(q.port, { rank: 5 }), (err: Error) => err instanceof RefusedError && /asked for rank 5, which is no submaster rank of a campaign of 3 masters/.test(err.message));
  const [a, b] = await Promise.all([first, submaster(q.port, { rank: 2 }), roster]);
  assert.deepEqual([a!.rank, b!.rank], [1, 2]);
});

test("without a rank to ask for, peer_hello carries none (a root of an earlier version reads it as before)", () => {
  assert.equal("rank" in peerHello(TOKEN, "m1", SETUP), false);
  assert.equal(peerHello(TOKEN, "m1", SETUP, 2).rank, 2, "a rank asked for travels in the hello");
});
