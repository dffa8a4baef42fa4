// The maze program and its toy concolic engine, free of I/O. `runMaze` executes one input,
// records every branch it takes on input bytes (its path), and derives one child per branch:
// the input that keeps every earlier branch and takes the other side of that one, as SymCC does
// when it negates one path constraint.
//
// Contract of the children, which is what makes content-addressed dedup meaningful:
//   * children[i] flips path[i]: run, it takes the same branches as the parent before i and the
//     opposite side at i;
//   * a child depends on the path prefix and the flipped branch only, never on the parent's raw
//     bytes: each byte the prefix read holds the canonical value of the class it fell into, the
//     flipped byte the canonical value of its new class, and every later byte is FILLER. So two
//     parents that share a path prefix produce byte-identical children;
//   * a child has the parent's length, capped at INPUT_BYTES (the most the program reads);
//   * the children of one run are pairwise distinct and never equal the parent.
// Every child is thus canonical, and a path reads at most INPUT_BYTES bytes and makes at most
// `depth` moves, so the closure of any seed is a finite set of paths.

/** The program reads at most this many bytes of its input, like the original 16-byte maze target. */
export const INPUT_BYTES = 16;
export const DEFAULT_DEPTH = 8;
export const MIN_DEPTH = 1;
export const MAX_DEPTH = INPUT_BYTES;

/** The signals a crashing run ends by: the program aborts at the treasure and segfaults off the map. */
export const SIGNAL_ABORT = "SIGABRT";
export const SIGNAL_SEGV = "SIGSEGV";

/** The byte a child holds where the program would stop ("."), and in every byte after the flip. */
export const FILLER = 0x2e;

// '#' wall, 'S' start, 'D' door (opens to a knock), '$' treasure (abort on entry). Everything
// past the end of a row, or above or below the rows, is unmapped: landing there is a segfault.
// The border is two walls thick except at the right end of the start row, so only a dash
// (which jumps two cells) through that thin wall leaves the map. The treasure is walled in
// two deep, so the door is the only way to it.
export const MAZE = Object.freeze([
  "##########",
  "##########",
  "##S   #  #",
  "## ## # #####",
  "##  D   #   ##",
  "####$##   # ##",
  "######## ## ##",
  "######## #  ##",
  "########   ###",
  "##############",
  "##############",
]);

const DASH = 0x80;
const HEADINGS = [
  [-1, 0], // U
  [1, 0], // D
  [0, -1], // L
  [0, 1], // R
];

/**
 * The branches a move byte meets, in program order. A byte's class is the index of the first
 * condition that holds, or MOVE_CONDITIONS.length when none does (the walker stops).
 */
const MOVE_CONDITIONS = [
  { text: "byte > 0x7f", holds: (b) => b > 0x7f, canonical: DASH },
  { text: "byte == 'U'", holds: (b) => b === 0x55, canonical: 0x55 },
  { text: "byte == 'D'", holds: (b) => b === 0x44, canonical: 0x44 },
  { text: "byte == 'L'", holds: (b) => b === 0x4c, canonical: 0x4c },
  { text: "byte == 'R'", holds: (b) => b === 0x52, canonical: 0x52 },
];
const STOP_CLASS = MOVE_CONDITIONS.length;

/**
 * @typedef {{ pos: number, condition: string, taken: boolean }} Branch
 * @typedef {{ kind: string, moves: number, row: number, col: number, message: string }} Ending
 * @typedef {{ signal: "SIGABRT" | "SIGSEGV", pos: number, message: string }} Crash  pos: the byte whose move crashed
 * @typedef {{ path: Branch[], children: Buffer[], moves: number, ending: Ending, crash: Crash | null }} MazeRun
 */

/**
 * Executes `input` (only its first INPUT_BYTES bytes are read).
 * Ending kinds: "stopped" (a byte that is no move), "stalled" (a dash before any heading),
 * "bumped" (a wall), "circled" (a cell already visited), "door-shut" (a wrong knock),
 * "out-of-moves" (`depth` moves made), "end-of-input", "crashed" (then `crash` is set:
 * SIGNAL_ABORT on the treasure, SIGNAL_SEGV when a dash leaves the map).
 * @param {Uint8Array} input
 * @param {{ depth?: number }} [options] depth: the most moves the walker makes, MIN_DEPTH..MAX_DEPTH
 * @returns {MazeRun}
 */
export function runMaze(input, options = {}) {
  const depth = options.depth ?? DEFAULT_DEPTH;
  if (!Number.isInteger(depth) || depth < MIN_DEPTH || depth > MAX_DEPTH) {
    throw new RangeError(`depth must be an integer from ${MIN_DEPTH} to ${MAX_DEPTH} (got ${depth})`);
  }
  const tape = input.subarray(0, INPUT_BYTES);
  // canonical[i]: the canonical value of byte i given the branches taken on it.
  const canonical = Buffer.alloc(tape.length, FILLER);
  const path = [];
  // flipValue[i]: the value of byte path[i].pos that takes the other side of path[i] while
  // keeping the branches taken on that byte before it.
  const flipValue = [];
  const branch = (pos, condition, taken, other) => {
    path.push({ pos, condition, taken });
    flipValue.push(other);
  };

  let [row, col] = startCell();
  let heading = null;
  let moves = 0;
  let pos = 0;
  const visited = new Set([cellKey(row, col)]);
  let crash = null;
  const end = (kind, message) => ({ kind, moves, row, col, message });

  let ending;
  for (;;) {
    if (moves === depth) {
      ending = end("out-of-moves", `out of moves after ${moves}`);
      break;
    }
    if (pos >= tape.length) {
      ending = end("end-of-input", `the input ended after ${moves} moves`);
      break;
    }
    const at = pos++;
    const cls = moveClass(tape[at]);
    for (let c = 0; c <= Math.min(cls, STOP_CLASS - 1); c++) {
      // Negating a false condition selects its class; negating the true one (all earlier
      // conditions still false) is satisfied by FILLER, which then stops the walker.
      const holds = c === cls;
      branch(at, MOVE_CONDITIONS[c].text, holds, holds ? FILLER : MOVE_CONDITIONS[c].canonical);
    }
    canonical[at] = cls === STOP_CLASS ? FILLER : MOVE_CONDITIONS[cls].canonical;
    if (cls === STOP_CLASS) {
      ending = end("stopped", `stopped at byte ${at}: not a move`);
      break;
    }
    let step;
    if (cls === 0) {
      if (heading === null) {
        ending = end("stalled", `dash at byte ${at} before any heading`);
        break;
      }
      step = [2 * heading[0], 2 * heading[1]];
    } else {
      heading = HEADINGS[cls - 1];
      step = heading;
    }
    const [toRow, toCol] = [row + step[0], col + step[1]];
    const cell = MAZE[toRow]?.[toCol];
    moves++;
    if (cell === undefined) {
      crash = { signal: SIGNAL_SEGV, pos: at, message: `segmentation fault: the dash at byte ${at} left the map at (${toRow},${toCol})` };
      ending = end("crashed", crash.message);
      break;
    }
    if (cell === "#") {
      ending = end("bumped", `bumped into the wall at (${toRow},${toCol})`);
      break;
    }
    if (visited.has(cellKey(toRow, toCol))) {
      ending = end("circled", `walked in a circle back to (${toRow},${toCol})`);
      break;
    }
    if (cell === "D") {
      // The knock: the byte after the move must repeat the move byte.
      if (pos >= tape.length) {
        ending = end("end-of-input", `the input ended at the door (${toRow},${toCol})`);
        break;
      }
      const knock = pos++;
      const opens = tape[knock] === tape[at];
      branch(knock, `byte == byte ${at}`, opens, opens ? FILLER : canonical[at]);
      canonical[knock] = opens ? canonical[at] : FILLER;
      if (!opens) {
        ending = end("door-shut", `the door at (${toRow},${toCol}) stays shut: byte ${knock} does not repeat byte ${at}`);
        break;
      }
    }
    [row, col] = [toRow, toCol];
    visited.add(cellKey(row, col));
    if (cell === "$") {
      crash = { signal: SIGNAL_ABORT, pos: at, message: `abort: treasure found at (${row},${col}) after ${moves} moves` };
      ending = end("crashed", crash.message);
      break;
    }
  }

  const children = path.map(({ pos: at }, i) => {
    // allocUnsafe draws small buffers from a shared pool: a closure holds hundreds of thousands.
    const child = Buffer.allocUnsafe(tape.length).fill(FILLER);
    canonical.copy(child, 0, 0, at);
    child[at] = flipValue[i];
    return child;
  });
  return { path, children, moves, ending, crash };
}

/**
 * Every input reachable from `seeds` by running each input and collecting its children, keyed by
 * the input's bytes in hex (seeds included), in the order a breadth-first search meets them.
 * Each value sums up that input's run; the children themselves are not kept.
 * @param {Uint8Array[]} seeds
 * @param {{ depth?: number }} [options]
 * @returns {Map<string, { children: number, moves: number, ending: Ending, crash: Crash | null }>}
 */
export function closure(seeds, options = {}) {
  const runs = new Map();
  const queue = [];
  const admit = (input) => {
    const hex = Buffer.from(input.buffer, input.byteOffset, input.byteLength).toString("hex");
    if (!runs.has(hex)) {
      runs.set(hex, null);
      queue.push(input);
    }
  };
  seeds.forEach(admit);
  for (let i = 0; i < queue.length; i++) {
    const { children, moves, ending, crash } = runMaze(queue[i], options);
    runs.set(Buffer.from(queue[i].buffer, queue[i].byteOffset, queue[i].byteLength).toString("hex"), {
      children: children.length,
      moves,
      ending,
      crash,
    });
    children.forEach(admit);
  }
  return runs;
}

function moveClass(b) {
  const i = MOVE_CONDITIONS.findIndex((c) => c.holds(b));
  return i === -1 ? STOP_CLASS : i;
}

function startCell() {
  const row = MAZE.findIndex((line) => line.includes("S"));
  return [row, MAZE[row].indexOf("S")];
}

function cellKey(r, c) {
  return `${r},${c}`;
}
