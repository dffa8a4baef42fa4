// The frame codec and the frame schemas, byte by byte.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { encodeFrame, FIRST_FRAME_BYTES, FrameDecoder, MAX_FRAME_BYTES } from "../../src/net/frame.ts";
import { check, CoordinatorReply, FirstFrame, WorkerFrame } from "../../src/net/messages.ts";
import { peerHello, setupHash, setupText, type CampaignSetup } from "../../src/explore/fleet/peers.ts";

const decodeAll = (chunks: Buffer[]) => {
  const d = new FrameDecoder();
  const out: unknown[] = [];
  for (const c of chunks) {
    d.push(c);
    for (let f = d.next(); f !== undefined; f = d.next()) out.push(f);
  }
  return out;
};

test("frames survive any split of the byte stream", () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({ type: fc.constantFrom("want", "done"), n: fc.integer(), s: fc.string() }).map((f) => ({ ...f })),
        { minLength: 1, maxLength: 8 },
      ),
      fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 20 }),
      (frames, cuts) => {
        const bytes = Buffer.concat(frames.map((f) => encodeFrame(f)));
        const chunks: Buffer[] = [];
        let at = 0;
        for (let i = 0; at < bytes.length; i++) {
          const n = cuts[i % cuts.length]!;
          chunks.push(bytes.subarray(at, at + n));
          at += n;
        }
        assert.deepEqual(decodeAll(chunks), frames);
      },
    ),
    { numRuns: 200 },
  );
});

test("the length cap is enforced from the header alone, before any body byte", () => {
  const d = new FrameDecoder();
  d.push(Buffer.from(`${MAX_FRAME_BYTES + 1}\n`));
  assert.throws(() => d.next(), /over the 4194304-byte cap/);
  const long = new FrameDecoder();
  long.push(Buffer.from("123456789"));
  assert.throws(() => long.next(), /over the 4194304-byte cap/, "a header too long to be valid fails without waiting for a newline");
  assert.throws(() => encodeFrame({ type: "text", text: "x".repeat(MAX_FRAME_BYTES) } as { type: string }), /over the/);
});

test("bad headers, bodies and shapes are errors, and an error is final", () => {
  const cases: [string | Buffer, RegExp][] = [
    ["abc\n{}", /bad frame header/],
    ["\n{}", /empty length/],
    ["0\n", /empty frame/],
    ["5\n{nope", /not JSON/],
    ["2\n[]", /not a JSON object/],
    ["11\n{\"type\":12}", /string 'type'/],
    [Buffer.concat([Buffer.from("2\n"), Buffer.from([0xc3, 0x28])]), /not valid UTF-8/],
  ];
  for (const [bytes, error] of cases) {
    const d = new FrameDecoder();
    d.push(Buffer.from(bytes));
    assert.throws(() => d.next(), error, String(bytes));
    d.push(encodeFrame({ type: "want" }));
    assert.throws(() => d.next(), error, "sticky");
  }
});

test("schemas refuse unknown types, extra and missing fields with a reason", () => {
  assert.deepEqual(check(FirstFrame, { type: "gimme", token: "t" }), { ok: false, reason: "unknown frame type 'gimme'" });
  assert.deepEqual(check(WorkerFrame, { type: "want", slots: 1, x: 1 }), { ok: false, reason: "frame 'want': unexpected field(s) x" });
  const missing = check(WorkerFrame, { type: "done", chunk_id: 1 });
  assert.equal(missing.ok, false);
  assert.match((missing as { reason: string }).reason, /frame 'done': elapsed/);
  assert.equal(check(WorkerFrame, { type: "heartbeat", ids: [1, 2] }).ok, true);
  assert.equal(check(WorkerFrame, { type: "heartbeat", ids: [-1] }).ok, false);
  assert.equal(check(CoordinatorReply, { type: "stop", token: "a".repeat(32) }).ok, true);
  assert.equal(check(FirstFrame, { type: "hello", token: "t", protocol: 1, host: "h", jobs: 0, slots: 1 }).ok, false, "jobs >= 1");
});

test("before authentication the cap is FIRST_FRAME_BYTES, checked from the header alone; raised, it admits MAX_FRAME_BYTES", () => {
  const d = new FrameDecoder(FIRST_FRAME_BYTES);
  d.push(Buffer.from(`${MAX_FRAME_BYTES}\n`));
  assert.throws(() => d.next(), /frame length 4194304 is over the 8192-byte cap of a first frame \(before the token is checked\)/);
  const early = new FrameDecoder(FIRST_FRAME_BYTES);
  early.push(Buffer.from("10000"));
  assert.throws(() => early.next(), /frame length 10000… is over the 8192-byte cap/, "five digits are over 8192 before the newline");
  const huge = new FrameDecoder(FIRST_FRAME_BYTES);
  huge.push(Buffer.from("999999999\n"));
  assert.throws(() => huge.next(), /over the 4194304-byte cap/, "a length over the absolute cap names that cap");
  const raised = new FrameDecoder(FIRST_FRAME_BYTES);
  const small = encodeFrame({ type: "hello", token: "t" } as { type: string });
  const big = encodeFrame({ type: "result", pad: "x".repeat(100_000) } as { type: string });
  raised.push(small);
  assert.deepEqual(raised.next(), { type: "hello", token: "t" });
  raised.limit = MAX_FRAME_BYTES;
  raised.push(big);
  assert.equal((raised.next() as { pad: string }).pad.length, 100_000);
});

test("every legitimate first frame fits the first-frame cap, even with the worst-case characters its schema allows", () => {
  // A control character is the longest a JSON string character gets: \u0001 is 6 bytes.
  const worst = (n: number) => "\u0001".repeat(n);
  const frames = [
    { type: "hello", token: worst(256), protocol: 1, host: worst(255), jobs: 1024, slots: 64 },
    { type: "status", token: worst(256), json: false },
    {
      type: "failures",
      token: worst(256),
      state: "stale",
      bucket: worst(64),
      all_generations: false,
      verbose: false,
      lines: 100_000,
      json: false,
    },
  ];
  for (const f of frames) {
    assert.equal(check(FirstFrame, f).ok, true, `${f.type} is valid`);
    const bytes = encodeFrame(f);
    assert.ok(bytes.length <= FIRST_FRAME_BYTES, `${f.type}: ${bytes.length} bytes`);
  }
  // peer_hello's setup_text may be up to 65,536 characters: the submaster sends it only when it fits.
  const setup: CampaignSetup = {
    corpus_dir: "/shared/corpus",
    input_dir: "/shared/seeds",
    target: ["./target", "@@"],
    target_build: "0123456789ab",
    timeout_seconds: 5,
    max_idle_seconds: 10,
    simulate: false,
    max_children: 1000,
    max_result_bytes: 1 << 20,
    max_input_bytes: 1 << 20,
    lease_ttl_seconds: 60,
    ownership: "rendezvous",
  };
  const usual = peerHello(worst(256), worst(255), setup);
  assert.equal(usual.setup_text, setupText(setup), "a usual setup travels whole");
  const long = { ...setup, target: ["./target", "\u0001".repeat(20_000), "@@"] };
  const shortened = peerHello(worst(256), worst(255), long);
  assert.equal(shortened.setup_text, "", "a setup too long for the cap travels empty");
  assert.equal(shortened.setup, setupHash(long), "the hash still decides");
  for (const f of [usual, shortened]) {
    assert.equal(check(FirstFrame, f).ok, true);
    assert.ok(encodeFrame(f).length <= FIRST_FRAME_BYTES, `peer_hello: ${encodeFrame(f).length} bytes`);
  }
});

test("a body that is not JSON is named with the peer's text escaped and cut, never raw", () => {
  const d = new FrameDecoder();
  const body = Buffer.from(`x\x1b[2J\x1b[H${"\n".repeat(3)}${"y".repeat(500)}`);
  d.push(Buffer.concat([Buffer.from(`${body.length}\n`), body]));
  let message = "";
  try {
    d.next();
  } catch (err) {
    message = (err as Error).message;
  }
  assert.match(message, /^frame body is not JSON \(/);
  assert.match(message, /\\x1b\[2J/, "the escape is shown escaped");
  assert.doesNotMatch(message, /[\x00-\x1f]/, "no control character survives");
  assert.ok(message.length < 250, `cut (${message.length} characters)`);
  const header = new FrameDecoder();
  header.push(Buffer.from("\x1b]0;pwned\x07\n"));
  assert.throws(() => header.next(), (err: Error) => /bad frame header/.test(err.message) && !/[\x00-\x1f]/.test(err.message));
});

test("unknown types and fields are named escaped and cut", () => {
  const r = check(FirstFrame, { type: `a\x1b[2J${"t".repeat(5000)}`, token: "t" });
  assert.equal(r.ok, false);
  const reason = (r as { reason: string }).reason;
  assert.match(reason, /^unknown frame type 'a\\x1b\[2Jt+… \(\+\d+ characters\)'$/);
  assert.ok(reason.length < 120);
  const extra = check(WorkerFrame, { type: "want", slots: 1, ["k\nREFUSED forged"]: 1 });
  assert.deepEqual(extra, { ok: false, reason: "frame 'want': unexpected field(s) k\\x0aREFUSED forged" });
});

test("bodyPending names the declared length while a body is incomplete", () => {
  const d = new FrameDecoder();
  const frame = encodeFrame({ type: "want", slots: 1 } as { type: string });
  const headerLength = frame.indexOf(0x0a) + 1;
  d.push(frame.subarray(0, headerLength + 3));
  assert.equal(d.next(), undefined);
  assert.equal(d.bodyPending(), frame.length - headerLength);
  d.push(frame.subarray(headerLength + 3));
  assert.deepEqual(d.next(), { type: "want", slots: 1 });
  assert.equal(d.bodyPending(), null);
  assert.equal(d.bufferedBytes, 0);
});
