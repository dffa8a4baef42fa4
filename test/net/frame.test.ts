// The frame codec and the frame schemas, byte by byte.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { encodeFrame, FrameDecoder, MAX_FRAME_BYTES } from "../../src/net/frame.ts";
import { check, CoordinatorReply, FirstFrame, WorkerFrame } from "../../src/net/messages.ts";

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
