// The bundled explore-mode target. The script is run the way the explore runner runs a SymCC
// target (real child processes, a real SYMCC_OUTPUT_DIR); the exploration closure is computed
// in-process with the script's own core, and a smaller closure by spawning the script proves the
// two agree.

import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import fc from "fast-check";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const SCRIPT = join(REPO, "examples/maze/maze.mjs");
const SEEDS_DIR = join(REPO, "examples/maze/seeds");

interface Branch {
  pos: number;
  condition: string;
  taken: boolean;
}
interface MazeRun {
  path: Branch[];
  children: Buffer[];
  moves: number;
  ending: { kind: string; moves: number; row: number; col: number; message: string };
  crash: { signal: "SIGABRT" | "SIGSEGV"; pos: number; message: string } | null;
}
interface MazeCore {
  INPUT_BYTES: number;
  DEFAULT_DEPTH: number;
  SIGNAL_ABORT: string;
  SIGNAL_SEGV: string;
  FILLER: number;
  runMaze(input: Uint8Array, options?: { depth?: number }): MazeRun;
  closure(seeds: Uint8Array[], options?: { depth?: number }): Map<string, Pick<MazeRun, "moves" | "ending" | "crash"> & { children: number }>;
}
const core = (await import(pathToFileURL(join(REPO, "examples/maze/maze-core.mjs")).href)) as MazeCore;

/** Unique inputs reachable from the bundled seeds (seeds included), as documented in the README. */
const CLOSURE_SIZES: Record<number, number> = {
  1: 8, 2: 18, 3: 33, 4: 59, 5: 95, 6: 161, 7: 273, 8: 471,
  9: 775, 10: 1218, 11: 1784, 12: 2419, 13: 3064, 14: 3751, 15: 4590, 16: 5245,
};

const scratch = mkdtempSync(join(tmpdir(), "maze-test-"));
after(() => rmSync(scratch, { recursive: true, force: true }));
let fresh = 0;
function freshPath(prefix: string): string {
  return join(scratch, `${prefix}-${fresh++}`);
}

function seeds(): Buffer[] {
  return readdirSync(SEEDS_DIR)
    .sort()
    .map((name) => readFileSync(join(SEEDS_DIR, name)));
}

/** The caller's environment without any MAZE_* or SYMCC_* variable, plus `env`. */
function childEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("MAZE_") && !k.startsWith("SYMCC_")) clean[k] = v;
  return { ...clean, ...env };
}

type Mode = "stdin" | "env" | "argv";

interface ScriptRun {
  status: number | null;
  /** The signal that ended the run, else null. */
  signal: NodeJS.Signals | null;
  stderr: string;
  ms: number;
  /** Output dir entries by name, or null when the run had no SYMCC_OUTPUT_DIR. */
  children: Map<string, Buffer> | null;
}

/**
 * Runs the script on `input` as the explore runner does: stdin is the input file (stdin mode), or
 * the path is in argv / SYMCC_INPUT_FILE and stdin is /dev/null (file mode).
 */
function runScript(
  input: Buffer | { path: string },
  opts: { mode?: Mode; env?: Record<string, string>; outDir?: boolean; args?: string[]; cwd?: string } = {},
): ScriptRun {
  const mode = opts.mode ?? "stdin";
  let inputPath: string;
  if (Buffer.isBuffer(input)) {
    inputPath = freshPath("input");
    writeFileSync(inputPath, input);
  } else {
    inputPath = input.path;
  }
  const env: Record<string, string> = { ...opts.env };
  const outDir = opts.outDir === false ? null : freshPath("out");
  if (outDir !== null) {
    mkdirSync(outDir);
    env.SYMCC_OUTPUT_DIR = outDir;
  }
  if (mode === "env") env.SYMCC_INPUT_FILE = inputPath;
  const args = opts.args ?? (mode === "argv" ? [inputPath] : []);
  const stdinFd = mode === "stdin" ? openSync(inputPath, "r") : null;
  const started = Date.now();
  try {
    const r = spawnSync(process.execPath, [SCRIPT, ...args], {
      cwd: opts.cwd ?? REPO,
      env: childEnv(env),
      stdio: [stdinFd ?? "ignore", "pipe", "pipe"],
      encoding: "utf8",
      timeout: 60_000,
    });
    assert.equal(r.error, undefined);
    assert.equal(r.stdout, "", "the target prints nothing on stdout");
    const children = outDir === null ? null : new Map(readdirSync(outDir).sort().map((n) => [n, readFileSync(join(outDir, n))] as const));
    return { status: r.status, signal: r.signal, stderr: r.stderr, ms: Date.now() - started, children };
  } finally {
    if (stdinFd !== null) closeSync(stdinFd);
  }
}

/** runScript in stdin mode, without blocking, so that several runs can overlap. */
async function runScriptAsync(input: Buffer, env: Record<string, string>): Promise<ScriptRun> {
  const inputPath = freshPath("input");
  writeFileSync(inputPath, input);
  const outDir = freshPath("out");
  mkdirSync(outDir);
  const stdinFd = openSync(inputPath, "r");
  const started = Date.now();
  try {
    const child = spawn(process.execPath, [SCRIPT], {
      cwd: REPO,
      env: childEnv({ ...env, SYMCC_OUTPUT_DIR: outDir }),
      stdio: [stdinFd, "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (code, sig) => resolve([code, sig]));
    });
    const children = new Map(readdirSync(outDir).sort().map((n) => [n, readFileSync(join(outDir, n))] as const));
    return { status, signal, stderr, ms: Date.now() - started, children };
  } finally {
    closeSync(stdinFd);
  }
}

/** Maps `items` through `fn` with at most `width` calls in flight, keeping the order. */
async function inPool<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
  return results;
}

/** What the script must write for `input`: the core's children under the names 000000, 000001, ... */
function expectedChildren(input: Buffer, depth?: number): Map<string, Buffer> {
  const run = core.runMaze(input, { depth });
  return new Map(run.children.map((c, i) => [String(i).padStart(6, "0"), c] as const));
}

function bytes(text: string): Buffer {
  return Buffer.from(text.replaceAll("*", "\x80"), "latin1");
}

const TREASURE = bytes("DDRRRD..........");
const OFF_MAP = bytes("R**R*...........");

describe("maze script", () => {
  test("writes the children of its path as files 000000.. in SYMCC_OUTPUT_DIR, never a .hints file", () => {
    const inputs = [...seeds(), bytes("DDRR!ignored tail"), Buffer.alloc(16, 0xff)];
    for (const input of inputs) {
      const r = runScript(input);
      assert.equal(r.status, 0, r.stderr);
      assert.ok(r.children!.size > 0);
      assert.deepEqual(r.children, expectedChildren(input), input.toString("latin1"));
      for (const name of r.children!.keys()) assert.ok(!name.endsWith(".hints"), name);
    }
  });

  test("the same input twice gives byte-identical children, by name and content", () => {
    const input = readFileSync(join(SEEDS_DIR, "door"));
    const a = runScript(input);
    const b = runScript(input);
    assert.equal(a.status, 0, a.stderr);
    assert.ok(a.children!.size >= 10);
    assert.deepEqual(b.children, a.children);
  });

  test("stdin, SYMCC_INPUT_FILE and an argv path give the same children", () => {
    for (const input of [readFileSync(join(SEEDS_DIR, "door")), TREASURE]) {
      const byStdin = runScript(input, { mode: "stdin" });
      const byEnv = runScript(input, { mode: "env" });
      const byArgv = runScript(input, { mode: "argv" });
      assert.ok(byStdin.children!.size > 0);
      assert.deepEqual(byEnv.children, byStdin.children);
      assert.deepEqual(byArgv.children, byStdin.children);
      assert.equal(byEnv.status, byStdin.status);
      assert.equal(byArgv.status, byStdin.status);
      assert.equal(byEnv.signal, byStdin.signal);
      assert.equal(byArgv.signal, byStdin.signal);
    }
  });

  test("without SYMCC_OUTPUT_DIR it reports the child count on stderr and writes nothing", () => {
    const cwd = freshPath("cwd");
    mkdirSync(cwd);
    const input = readFileSync(join(SEEDS_DIR, "door"));
    const r = runScript(input, { outDir: false, cwd });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`; ${core.runMaze(input).children.length} children \\(SYMCC_OUTPUT_DIR is not set: none written\\)`));
    assert.deepEqual(readdirSync(cwd), []);
  });

  test("a crashing run writes all its children first, then ends by a real SIGABRT (treasure) or SIGSEGV (off the map)", () => {
    for (const [input, signal, text] of [
      [TREASURE, "SIGABRT", "maze: crashed at byte 5: abort: treasure found at (5,4)"],
      [OFF_MAP, "SIGSEGV", "maze: crashed at byte 4: segmentation fault: the dash at byte 4 left the map at (2,10)"],
    ] as const) {
      const r = runScript(input);
      assert.equal(r.signal, signal, r.stderr);
      assert.equal(r.status, null, "killed by the signal, not an exit");
      assert.ok(r.stderr.includes(text), r.stderr);
      assert.ok(r.children!.size >= 10);
      assert.deepEqual(r.children, expectedChildren(input));
    }
  });

  test("MAZE_DEPTH bounds the walk and is part of what the children are", () => {
    const input = readFileSync(join(SEEDS_DIR, "door"));
    const shallow = runScript(input, { env: { MAZE_DEPTH: "2" } });
    const deep = runScript(input, { env: { MAZE_DEPTH: "16" } });
    assert.equal(shallow.status, 0, shallow.stderr);
    assert.match(shallow.stderr, /out of moves after 2/);
    assert.deepEqual(shallow.children, expectedChildren(input, 2));
    assert.deepEqual(deep.children, expectedChildren(input, 16));
    assert.ok(shallow.children!.size < deep.children!.size);
  });

  test("MAZE_COST_MS makes a run take at least that long and changes no child", () => {
    const input = readFileSync(join(SEEDS_DIR, "door"));
    const costly = runScript(input, { env: { MAZE_COST_MS: "400" } });
    assert.equal(costly.status, 0, costly.stderr);
    // A lower bound only: a busy machine makes the run slower, never faster.
    assert.ok(costly.ms >= 400, `MAZE_COST_MS=400 took ${costly.ms} ms`);
    assert.deepEqual(costly.children, runScript(input).children);
  });

  test("a bad variable or argument exits 2, names it on stderr and writes nothing", () => {
    const input = readFileSync(join(SEEDS_DIR, "door"));
    const cases: [Record<string, string>, string[] | undefined, RegExp][] = [
      [{ MAZE_DEPTH: "0" }, undefined, /MAZE_DEPTH wants an integer from 1 to 16 \(got '0'\)/],
      [{ MAZE_DEPTH: "17" }, undefined, /MAZE_DEPTH/],
      [{ MAZE_DEPTH: "deep" }, undefined, /MAZE_DEPTH/],
      [{ MAZE_COST_MS: "-5" }, undefined, /MAZE_COST_MS/],
      [{ MAZE_COST_MS: "1.5" }, undefined, /MAZE_COST_MS/],
      [{}, [join(scratch, "no-such-input")], /cannot read the input file '.*no-such-input'/],
      [{}, ["a", "b"], /at most one argument/],
    ];
    for (const [env, args, message] of cases) {
      const r = runScript(input, { env, args });
      assert.equal(r.status, 2, `${JSON.stringify(env)} ${args}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.deepEqual(r.children, new Map());
    }
  });

  test("an empty input ends at once with no children", () => {
    for (const mode of ["stdin", "env", "argv"] as const) {
      const r = runScript(Buffer.alloc(0), { mode });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stderr, /the input ended after 0 moves; 0 children/);
      assert.deepEqual(r.children, new Map());
    }
  });

  test("a huge input is read only up to 16 bytes, and its children are 16 bytes long", () => {
    const huge = freshPath("huge");
    const fd = openSync(huge, "w");
    writeFileSync(fd, "DDRRRU");
    ftruncateSync(fd, 8 * 1024 ** 3); // sparse: reading it all would take far longer than the timeout
    closeSync(fd);
    const expected = expectedChildren(Buffer.concat([Buffer.from("DDRRRU"), Buffer.alloc(10)]));
    for (const mode of ["stdin", "env", "argv"] as const) {
      const r = runScript({ path: huge }, { mode });
      assert.equal(r.status, 0, r.stderr);
      assert.ok(r.children!.size >= 10);
      assert.deepEqual(r.children, expected);
      for (const child of r.children!.values()) assert.equal(child.length, core.INPUT_BYTES);
    }
  });

  test("a stdin that stays open does not hold the run once 16 bytes arrived", async () => {
    const outDir = freshPath("out");
    mkdirSync(outDir);
    const child = spawn(process.execPath, [SCRIPT], { env: childEnv({ SYMCC_OUTPUT_DIR: outDir }), stdio: ["pipe", "ignore", "ignore"] });
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
    child.stdin.on("error", () => {}); // the target may exit before the pipe drains
    child.stdin.write(readFileSync(join(SEEDS_DIR, "door")));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    const code = await exited;
    clearTimeout(timer);
    child.stdin.destroy();
    assert.equal(code, 0, "exited on its own with the pipe still open");
    assert.equal(readdirSync(outDir).length, core.runMaze(readFileSync(join(SEEDS_DIR, "door"))).children.length);
  });

  test("spawning the script for every input of the MAZE_DEPTH=3 closure reproduces the core's closure", async () => {
    // Depth 3 keeps this to 33 runs; crashes need depth 5 and are covered above and in-process.
    const depth = 3;
    const expected = core.closure(seeds(), { depth });
    const seen = new Set<string>();
    let level = seeds();
    level.forEach((s) => seen.add(s.toString("hex")));
    while (level.length > 0) {
      const next: Buffer[] = [];
      const runs = await inPool(level, 4, (input) => runScriptAsync(input, { MAZE_DEPTH: String(depth) }));
      for (const [i, r] of runs.entries()) {
        const input = level[i];
        const run = expected.get(input.toString("hex"));
        assert.ok(run, `${input.toString("latin1")} is in the core's closure`);
        assert.equal(r.status, run.crash ? null : 0, r.stderr);
        assert.equal(r.signal, run.crash?.signal ?? null, r.stderr);
        assert.deepEqual(r.children, expectedChildren(input, depth));
        for (const child of r.children!.values()) {
          const hex = child.toString("hex");
          if (!seen.has(hex)) {
            seen.add(hex);
            next.push(child);
          }
        }
      }
      level = next;
    }
    assert.deepEqual([...seen].sort(), [...expected.keys()].sort());
    assert.equal(seen.size, CLOSURE_SIZES[depth]);
  });
});

describe("maze core", () => {
  test("the closure from the bundled seeds is finite, of the documented size at every MAZE_DEPTH, and the same when computed twice", () => {
    assert.equal(core.DEFAULT_DEPTH, 8);
    const sizes: Record<number, number> = {};
    for (let depth = 1; depth <= 16; depth++) sizes[depth] = core.closure(seeds(), { depth }).size;
    assert.deepEqual(sizes, CLOSURE_SIZES);
    const first = core.closure(seeds());
    assert.ok(first.size >= 200 && first.size <= 800, `default closure holds ${first.size} inputs`);
    assert.deepEqual([...core.closure(seeds()).keys()], [...first.keys()]);
  });

  test("the default closure reaches both crash states, and every crashing run has children", () => {
    const crashes = [...core.closure(seeds())].filter(([, run]) => run.crash !== null);
    const described = crashes.map(([hex, run]) => [Buffer.from(hex, "hex").toString("latin1").replaceAll("\x80", "*"), run.crash!.signal]);
    assert.deepEqual(described.sort(), [
      ["DDR**L**D.......", "SIGABRT"],
      ["DDR*LLD.........", "SIGABRT"],
      ["DDRRRD..........", "SIGABRT"],
      ["R**DDL**D.......", "SIGABRT"],
      ["R**R*...........", "SIGSEGV"],
      ["R*DDLLD.........", "SIGABRT"],
      ["RRR*R*..........", "SIGSEGV"],
      ["RRRDDLLD........", "SIGABRT"],
    ]);
    for (const [, run] of crashes) assert.ok(run.children >= run.moves);
  });

  test("inputs that take the same path get byte-identical children", () => {
    const same = [
      ["DDhello, maze!!!", "DD.............."],
      ["DD\xff!", "DD\x80?"],
      ["DDRRRRjunk", "DDRRRR...."],
      ["R\x81\x81R", "R\x80\x80R"],
    ];
    for (const [a, b] of same) {
      const [ra, rb] = [core.runMaze(Buffer.from(a, "latin1")), core.runMaze(Buffer.from(b, "latin1"))];
      assert.deepEqual(ra.path, rb.path, `${a} and ${b} take one path`);
      assert.ok(ra.children.length > 0);
      assert.deepEqual(ra.children, rb.children);
    }
  });

  const MOVE_BYTES = [0x55, 0x44, 0x4c, 0x52, 0x80, 0xa5, 0xff, 0x2e, 0x00, 0x75];
  const inputArb = fc.uint8Array({ minLength: 0, maxLength: 24 }).chain((noise) =>
    fc.array(fc.constantFrom(...MOVE_BYTES), { minLength: noise.length, maxLength: noise.length }).chain((moves) =>
      fc.array(fc.boolean(), { minLength: noise.length, maxLength: noise.length }).map((pick) =>
        Buffer.from(noise.map((b, i) => (pick[i] ? b : moves[i]))),
      ),
    ),
  );

  test("each child flips exactly its branch of the parent's path, has the parent's length and is new", () => {
    fc.assert(
      fc.property(inputArb, fc.integer({ min: 1, max: 16 }), (input, depth) => {
        const parent = core.runMaze(input, { depth });
        assert.equal(parent.children.length, parent.path.length);
        const hexes = new Set(parent.children.map((c) => c.toString("hex")));
        assert.equal(hexes.size, parent.children.length, "children are pairwise distinct");
        assert.ok(!hexes.has(input.subarray(0, core.INPUT_BYTES).toString("hex")), "no child equals its parent");
        for (const [i, child] of parent.children.entries()) {
          assert.equal(child.length, Math.min(input.length, core.INPUT_BYTES));
          const flipped = core.runMaze(child, { depth }).path;
          assert.deepEqual(flipped.slice(0, i), parent.path.slice(0, i));
          assert.deepEqual(flipped[i], { ...parent.path[i], taken: !parent.path[i].taken });
          // Past the flipped byte a child holds FILLER only: it is canonical.
          assert.ok(child.subarray(parent.path[i].pos + 1).every((b) => b === core.FILLER));
        }
      }),
      { numRuns: 400 },
    );
  });

  test("children depend on the path only: a class-preserving rewrite of the parent changes none", () => {
    let samePath = 0;
    fc.assert(
      fc.property(inputArb, fc.uint8Array({ minLength: 24, maxLength: 24 }), (input, noise) => {
        // Rewrite every byte to another of its class: a dash stays > 0x7f, a letter move stays,
        // anything else becomes another non-move byte; bytes past the read prefix become noise.
        const moveLetters = new Set([0x55, 0x44, 0x4c, 0x52]);
        const rewritten = Buffer.from(
          input.map((b, i) => {
            if (i >= core.INPUT_BYTES) return noise[i];
            if (moveLetters.has(b)) return b;
            if (b > 0x7f) return 0x80 | noise[i];
            const other = noise[i] & 0x7f;
            return moveLetters.has(other) ? core.FILLER : other;
          }),
        );
        const [a, b] = [core.runMaze(input), core.runMaze(rewritten)];
        // A knock compares two bytes, so a rewrite can change a path; the claim is about equal paths.
        if (JSON.stringify(a.path) !== JSON.stringify(b.path)) return;
        samePath++;
        assert.deepEqual(b.children, a.children);
      }),
      { numRuns: 400 },
    );
    assert.ok(samePath >= 200, `only ${samePath} of 400 rewrites kept the path`);
  });
});
