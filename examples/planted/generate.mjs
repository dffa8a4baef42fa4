// Seed -> program. Deterministic: a seed and a size always give the same program, on any
// machine, in any worker (integer-only PRNG, no Math.random, no clock).
//
// Natural programs never contain a bug trigger: literals are >= 0, `swap` never follows `swap`,
// `drop` never follows `dup`, and `pow` only appears as `push E; pow` with 0 <= E <= 4. Bugs come
// from *idioms* the generator plants with a fixed per-program probability, drawn before anything
// that depends on the size, so every rate is the same for both sizes:
//   swap pair   `swap; swap`                       1/100  -> crash
//   dup pair    `dup; drop`                        1/100  -> crash
//   neg fold    `push A; push -B; sub|mul; out`    1/490  -> wrong-result (1/500 after crash masks it)
//   neg pow     `push -E; pow`                     1/4900 -> hang-detected (1/5000 after masking)
//   slip        a binary op where the stack is too shallow: the emitted test is invalid
//               (quarantine, not a find)           1/1000

export const SIZES = Object.freeze({
  small: { salt: 0x2f6b1d35, minLength: 12, maxLength: 30, maxDepth: 6 },
  large: { salt: 0x7c3a95e1, minLength: 60, maxLength: 160, maxDepth: 12 },
});

export const IDIOM_RATES = Object.freeze({
  swapPair: 1 / 100,
  dupPair: 1 / 100,
  negFold: 1 / 490,
  negPow: 1 / 4900,
  slip: 1 / 1000,
});

function mix32(h) {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * A Weyl sequence passed through the murmur3 finalizer, started from a hash of (seed, salt).
 * Seeds are non-negative safe integers, so both 32-bit halves take part.
 */
export class SeedRandom {
  constructor(seed, salt) {
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 4294967296) >>> 0;
    this.state = mix32(mix32(lo ^ salt) ^ Math.imul(hi + 1, 0x9e3779b9));
  }

  /** A float in [0, 1). */
  next() {
    this.state = (this.state + 0x9e3779b9) | 0;
    return mix32(this.state) / 4294967296;
  }

  /** An integer in [lo, hi]. */
  int(lo, hi) {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
}

/**
 * The program for `seed` at `size` ("small" | "large"). A planted slip makes it invalid on
 * purpose; callers find that out with validateProgram.
 */
export function generateProgram(seed, size) {
  const shape = SIZES[size];
  const rng = new SeedRandom(seed, shape.salt);
  // The plan is drawn first, with a fixed number of draws, so idiom rates do not depend on size.
  const plan = {
    swapPair: rng.next() < IDIOM_RATES.swapPair,
    dupPair: rng.next() < IDIOM_RATES.dupPair,
    negFold: rng.next() < IDIOM_RATES.negFold,
    negPow: rng.next() < IDIOM_RATES.negPow,
    slip: rng.next() < IDIOM_RATES.slip,
  };
  const length = rng.int(shape.minLength, shape.maxLength);
  const idiomAt = new Map();
  for (const name of ["swapPair", "dupPair", "negFold", "negPow"]) {
    if (!plan[name]) continue;
    const at = rng.int(0, length - 1);
    idiomAt.set(at, [...(idiomAt.get(at) ?? []), name]);
  }

  const emitter = new Emitter(rng, shape.maxDepth);
  for (let t = 0; t < length; t++) {
    for (const name of idiomAt.get(t) ?? []) emitter.idiom(name);
    emitter.natural();
  }
  if (plan.slip) emitter.slip();
  return emitter.program;
}

// Natural choices; "pow" stands for the atomic `push E; pow` pair. Weights are set per step.
const NATURAL = ["push", "dup", "drop", "out", "neg", "add", "sub", "mul", "swap", "pow"];

class Emitter {
  constructor(rng, maxDepth) {
    this.rng = rng;
    this.maxDepth = maxDepth;
    this.program = [];
    this.depth = 0;
    /** depthBefore[i] = stack depth when instruction i starts. */
    this.depthBefore = [];
    this.weights = new Float64Array(NATURAL.length);
  }

  emit(op, arg) {
    this.depthBefore.push(this.depth);
    this.program.push(op === "push" ? { op, arg } : { op });
    if (op === "push" || op === "dup") this.depth += 1;
    else if (op !== "swap" && op !== "neg") this.depth -= 1;
  }

  lastOp() {
    return this.program.length === 0 ? "" : this.program[this.program.length - 1].op;
  }

  literal() {
    return this.rng.int(0, 99);
  }

  fill(depth) {
    while (this.depth < depth) this.emit("push", this.literal());
  }

  idiom(name) {
    const rng = this.rng;
    switch (name) {
      case "swapPair":
        this.fill(2);
        this.emit("swap");
        this.emit("swap");
        break;
      case "dupPair":
        this.fill(1);
        this.emit("dup");
        this.emit("drop");
        break;
      case "negFold":
        this.emit("push", rng.int(1, 99));
        this.emit("push", -rng.int(1, 99));
        this.emit(rng.next() < 0.5 ? "sub" : "mul");
        // Emitted at once, so later instructions cannot drop or zero the wrong value unseen.
        this.emit("out");
        break;
      case "negPow":
        this.fill(1);
        this.emit("push", -rng.int(1, 9));
        this.emit("pow");
        break;
    }
  }

  /** One natural instruction (or the atomic `push E; pow` pair), chosen by depth. */
  natural() {
    const d = this.depth;
    const last = this.lastOp();
    const room = d < this.maxDepth;
    const w = this.weights;
    w[0] = room ? (d < 2 ? 6 : 3) : 0;
    w[1] = d >= 1 && room ? 1 : 0;
    w[2] = d >= 1 && last !== "dup" ? 1 : 0;
    w[3] = d >= 1 ? 1 : 0;
    w[4] = d >= 1 ? 1 : 0;
    w[5] = w[6] = w[7] = d >= 2 ? 2 : 0;
    w[8] = d >= 2 && last !== "swap" ? 1 : 0;
    w[9] = d >= 1 && room ? 1 : 0;
    let total = 0;
    for (let k = 0; k < NATURAL.length; k++) total += w[k];
    let pick = this.rng.next() * total;
    let k = 0;
    while (pick >= w[k]) pick -= w[k++];
    const op = NATURAL[k];
    if (op === "push") {
      this.emit("push", this.literal());
    } else if (op === "pow") {
      this.emit("push", this.rng.int(0, 4));
      this.emit("pow");
    } else {
      this.emit(op);
    }
  }

  /** The generator's own bug: a binary op inserted where the stack holds fewer than two values. */
  slip() {
    const shallow = [];
    for (let i = 0; i < this.program.length; i++) if (this.depthBefore[i] < 2) shallow.push(i);
    const at = shallow.length === 0 ? 0 : shallow[this.rng.int(0, shallow.length - 1)];
    const op = ["add", "sub", "mul", "swap"][this.rng.int(0, 3)];
    this.program.splice(at, 0, { op });
  }
}
