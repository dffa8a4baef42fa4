// ChildLanding (explore/fleet/child-landing.ts): the children a worker without the shared
// directory sends land piece by piece in the stage a shared worker would have written, and
// everything out of the protocol's order or over the budgets is refused with the landing dropped.
// A real directory; the frames as the wire's schema lets them through.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ChildLanding } from "../../src/explore/fleet/child-landing.ts";
import type { PutFrame } from "../../src/net/messages.ts";
import { scratchDirs, sha256 } from "../helpers/scratch.ts";

const { freshDir } = scratchDirs("child-landing");
const STAGE = "ab".repeat(16);
const BUDGETS = { maxChildren: 3, maxResultBytes: 64, maxInputBytes: 64 };

function piece(unit: number, data: Buffer, offset: number, size: number, name: string, last: boolean): PutFrame {
  return { type: "put", unit, path: `${STAGE}/${name}`, size, offset, data: data.toString("base64"), sha256: last ? name : null };
}

function whole(unit: number, data: Buffer): PutFrame {
  return piece(unit, data, 0, data.length, sha256(data), true);
}

test("children sent in pieces land whole in the stage under their hash names, and settle against exactly the declared set", async () => {
  const root = freshDir();
  const landing = new ChildLanding(root, BUDGETS);
  const a = Buffer.from("first child, in three pieces\n");
  const b = Buffer.from("");
  const name = sha256(a);
  assert.equal(await landing.put(piece(7, a.subarray(0, 10), 0, a.length, name, false)), null);
  assert.equal(await landing.put(piece(7, a.subarray(10, 20), 10, a.length, name, false)), null);
  assert.equal(await landing.put(piece(7, a.subarray(20), 20, a.length, name, true)), null);
  assert.equal(await landing.put(whole(7, b)), null, "an empty child is one piece");
  assert.deepEqual(readdirSync(join(root, STAGE)).sort(), [name, sha256(b)].sort());
  assert.deepEqual(readFileSync(join(root, STAGE, name)), a);
  assert.equal(landing.settle(7, STAGE, [name, sha256(b), name]), null, "duplicates in the result name one file");
  assert.equal(landing.landing, 0);
  assert.ok(existsSync(join(root, STAGE)), "a settled stage stays for the master's verification");
});

test("a piece out of order, a child sent twice, a digest before the end, bytes past the size or not canonical base64 are refused and what landed is removed", async () => {
  const a = Buffer.from("some child bytes\n");
  const name = sha256(a);
  const cases: [string, PutFrame[], RegExp][] = [
    ["out of order", [piece(1, a.subarray(0, 4), 0, a.length, name, false), piece(1, a.subarray(8), 8, a.length, name, true)], /pieces come in order, one file after another/],
    ["starts late", [piece(1, a.subarray(4), 4, a.length, name, true)], /starts at offset 4, not 0/],
    ["twice", [whole(1, a), whole(1, a)], /was sent twice/],
    ["digest early", [{ ...piece(1, a.subarray(0, 4), 0, a.length, name, false), sha256: name }], /names its SHA-256 before its last piece/],
    ["too long", [piece(1, a, 0, 4, name, true)], /longer than its declared 4 bytes/],
    ["base64", [{ ...whole(1, a), data: "!!" + whole(1, a).data }], /not canonical base64/],
    ["another stage", [whole(1, a), { ...whole(1, Buffer.from("x")), path: `${"cd".repeat(16)}/${sha256("x")}` }], /go to stage (ab){16}, not (cd){16}/],
    ["over the children budget", ["1", "2", "3", "4"].map((s) => whole(1, Buffer.from(s))), /more than 3 children \(--max-children\)/],
    ["over the bytes budget", [whole(1, Buffer.alloc(40)), whole(1, Buffer.alloc(30, 1))], /more than 64 bytes of children \(--max-result-bytes\)/],
  ];
  for (const [what, frames, reason] of cases) {
    const root = freshDir();
    const landing = new ChildLanding(root, BUDGETS);
    const answers: (string | null)[] = [];
    for (const f of frames) answers.push(await landing.put(f));
    const refused = answers.at(-1);
    assert.ok(refused, `${what}: the last piece is refused`);
    assert.match(refused, reason, what);
    assert.ok(answers.slice(0, -1).every((x) => x === null), `${what}: the pieces before it were taken`);
    assert.deepEqual(readdirSync(root), [], `${what}: nothing stays landed`);
    assert.equal(landing.landing, 0);
  }
});

test("a result that does not name exactly what landed is refused, and the stage removed", async () => {
  const a = Buffer.from("child a\n");
  const b = Buffer.from("child b\n");
  const cases: [string, PutFrame[], string, string[], RegExp][] = [
    ["a child missing", [whole(1, a)], STAGE, [sha256(a), sha256(b)], /declared child [0-9a-f]{64} did not arrive/],
    ["an extra child", [whole(1, a), whole(1, b)], STAGE, [sha256(a)], /arrived but the result does not declare it/],
    ["in part", [piece(1, a.subarray(0, 3), 0, a.length, sha256(a), false)], STAGE, [sha256(a)], /arrived only in part \(3 of 8 bytes\)/],
    ["no stage named", [whole(1, a)], "", [], /children were sent to stage (ab){16}, but the result names none/],
    ["another stage named", [whole(1, a)], "cd".repeat(16), [sha256(a)], /names stage (cd){16}, but the children were sent to (ab){16}/],
    ["nothing sent", [], STAGE, [sha256(a)], /none of its children arrived/],
  ];
  for (const [what, frames, stageId, declared, reason] of cases) {
    const root = freshDir();
    const landing = new ChildLanding(root, BUDGETS);
    for (const f of frames) assert.equal(await landing.put(f), null, what);
    assert.match(landing.settle(1, stageId, declared) ?? "", reason, what);
    assert.deepEqual(readdirSync(root), [], `${what}: the stage is removed`);
  }
  const root = freshDir();
  const landing = new ChildLanding(root, BUDGETS);
  assert.equal(landing.settle(1, "", []), null, "a result without children, with nothing sent, is fine");
});

test("a worker gone mid-transfer: dropAll removes every stage landing, a half-written child included", async () => {
  const root = freshDir();
  const landing = new ChildLanding(root, BUDGETS);
  const a = Buffer.from("child a\n");
  assert.equal(await landing.put(piece(1, a.subarray(0, 3), 0, a.length, sha256(a), false)), null);
  assert.equal(await landing.put({ ...whole(2, a), path: `${"ef".repeat(16)}/${sha256(a)}` }), null);
  assert.equal(readdirSync(root).length, 2);
  landing.dropAll();
  assert.deepEqual(readdirSync(root), []);
  assert.equal(landing.landing, 0);
});

test("a worker gone while a piece is being written: the landing is removed once the piece is written, nothing is made again after it, no descriptor is left", async () => {
  const root = freshDir();
  const landing = new ChildLanding(root, BUDGETS);
  const fds = () => readdirSync("/proc/self/fd").length;
  const before = fds();
  const a = Buffer.from("child a, landing when its worker goes\n");
  // The piece's stage is made and its file written in libuv's pool; the worker goes meanwhile.
  const landed = landing.put(whole(1, a));
  landing.dropAll();
  assert.equal(await landed, null);
  // The removal ran after the piece: nothing of the task is left, not even a stage made after it.
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(readdirSync(root), []);
  assert.equal(landing.landing, 0);
  assert.equal(fds(), before, "the child's descriptor was closed once, by its own landing");
});
