// The toy stack language, its reference semantics, and the "system under test": an optimising
// implementation of the same language with three planted bugs.
//
// A program is an array of instructions `{ op, arg }` (`arg` only for `push`), one per line in
// text form. All arithmetic is on 32-bit signed integers.
//
//   push N   -> N            dup   a -> a a       drop  a ->          swap  a b -> b a
//   neg      a -> -a         add   a b -> a+b     sub   a b -> a-b      mul   a b -> a*b
//   pow      a b -> a^b      (b < 0 gives 0; otherwise the exponent is b mod 32)
//   out      a ->            (appends a to the output)
//
// The observable result of a run is the output list followed by the final stack. The checker
// runs the reference and the implementation and compares the two results.
//
// Planted bugs, all in the implementation's peephole pass, listed in the order the checker meets
// them (which is also the reporting priority when one program carries two):
//   crash          cancelling an adjacent `swap; swap` or `dup; drop` pair throws
//   hang-detected  `push E; pow` with a literal E < 0 is expanded into a countdown that never ends
//   wrong-result   folding `push A; push B; sub|mul` with a literal B < 0 uses |B| instead of B

/** Failure buckets, in reporting priority. */
export const BUCKETS = Object.freeze(["crash", "hang-detected", "wrong-result"]);

/** Stack values an instruction needs, and how it changes the depth. */
export const OPS = Object.freeze({
  push: { need: 0, net: 1 },
  dup: { need: 1, net: 1 },
  drop: { need: 1, net: -1 },
  swap: { need: 2, net: 0 },
  neg: { need: 1, net: 0 },
  add: { need: 2, net: -1 },
  sub: { need: 2, net: -1 },
  mul: { need: 2, net: -1 },
  pow: { need: 2, net: -1 },
  out: { need: 1, net: -1 },
});

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/** One instruction per line, `\n` terminated; the bytes fuzzfleet hashes for dedup. */
export function formatProgram(program) {
  let text = "";
  for (const ins of program) text += ins.op === "push" ? `push ${ins.arg}\n` : `${ins.op}\n`;
  return text;
}

/**
 * Static validity: known ops, int32 literals, and no instruction ever finds fewer values on the
 * stack than it needs. Returns null for a valid program, else a one-line reason.
 */
export function validateProgram(program) {
  let depth = 0;
  for (let i = 0; i < program.length; i++) {
    const ins = program[i];
    const spec = OPS[ins.op];
    if (spec === undefined) return `unknown instruction '${ins.op}' at line ${i + 1}`;
    if (ins.op === "push" && !(Number.isInteger(ins.arg) && ins.arg >= INT32_MIN && ins.arg <= INT32_MAX)) {
      return `push at line ${i + 1} wants a 32-bit integer (got ${ins.arg})`;
    }
    if (depth < spec.need) {
      return `stack underflow at line ${i + 1}: ${ins.op} needs ${spec.need} value(s), the stack holds ${depth}`;
    }
    depth += spec.net;
  }
  return null;
}

function power(base, exponent) {
  if (exponent < 0) return 0;
  let result = 1;
  for (let n = exponent & 31; n > 0; n--) result = Math.imul(result, base);
  return result;
}

function binary(op, a, b) {
  switch (op) {
    case "add":
      return (a + b) | 0;
    case "sub":
      return (a - b) | 0;
    case "mul":
      return Math.imul(a, b);
    default:
      return power(a, b);
  }
}

/** The reference semantics. Precondition: `validateProgram(program) === null`. */
export function runReference(program) {
  const stack = [];
  const out = [];
  for (const ins of program) step(ins, stack, out);
  return { out, stack };
}

function step(ins, stack, out) {
  switch (ins.op) {
    case "push":
      stack.push(ins.arg);
      break;
    case "dup":
      stack.push(stack[stack.length - 1]);
      break;
    case "drop":
      stack.pop();
      break;
    case "swap": {
      const b = stack.pop();
      const a = stack.pop();
      stack.push(b, a);
      break;
    }
    case "neg":
      stack.push(-stack.pop() | 0);
      break;
    case "out":
      out.push(stack.pop());
      break;
    default: {
      const b = stack.pop();
      const a = stack.pop();
      stack.push(binary(ins.op, a, b));
    }
  }
}

/** A planted bug fired inside the implementation. */
class PlantedFailure extends Error {
  constructor(bucket, message) {
    super(message);
    this.bucket = bucket;
  }
}

/**
 * The implementation's peephole pass: turns source instructions into internal code. Unchanged
 * instructions are shared with the source; rewritten ones remember their source line. `fixed` is a Set of buckets whose bug is repaired.
 */
function compile(program, fixed) {
  const code = [];
  for (let i = 0; i < program.length; i++) {
    const a = program[i];
    const b = program[i + 1];
    const c = program[i + 2];
    const line = i + 1;
    if (b !== undefined && ((a.op === "swap" && b.op === "swap") || (a.op === "dup" && b.op === "drop"))) {
      if (!fixed.has("crash")) {
        throw new PlantedFailure(
          "crash",
          `TypeError in peephole: cancelling '${a.op}; ${b.op}' at line ${line} read past the end of the block`,
        );
      }
      i += 1;
      continue;
    }
    if (a.op === "push" && b?.op === "push" && (c?.op === "add" || c?.op === "sub" || c?.op === "mul")) {
      const folded = c.op !== "add" && b.arg < 0 && !fixed.has("wrong-result") ? Math.abs(b.arg) | 0 : b.arg;
      code.push({ op: "push", arg: binary(c.op, a.arg, folded), line });
      i += 2;
      continue;
    }
    if (a.op === "push" && b?.op === "pow") {
      if (a.arg >= 0) code.push({ op: "powc", arg: a.arg & 31, line: line + 1 });
      else if (!fixed.has("hang-detected")) code.push({ op: "powloop", arg: a.arg, line: line + 1 });
      else code.push({ op: "drop", line: line + 1 }, { op: "push", arg: 0, line: line + 1 });
      i += 1;
      continue;
    }
    code.push(a);
  }
  return code;
}

/** Runs the implementation. Throws PlantedFailure for crash and hang-detected. */
function runImplementation(program, fixed) {
  const code = compile(program, fixed);
  // Every source instruction costs at most 32 steps (pow), so a finite run always fits.
  const budget = 32 * program.length + 64;
  let steps = 0;
  const stack = [];
  const out = [];
  for (const ins of code) {
    steps += 1;
    if (ins.op === "powc") {
      const base = stack.pop();
      stack.push(power(base, ins.arg));
      steps += ins.arg;
    } else if (ins.op === "powloop") {
      const base = stack.pop();
      let result = 1;
      for (let n = ins.arg; n !== 0; n--) {
        if (++steps > budget) {
          throw new PlantedFailure(
            "hang-detected",
            `step budget of ${budget} exhausted in pow at line ${ins.line}: the program never finishes`,
          );
        }
        result = Math.imul(result, base);
      }
      stack.push(result);
    } else {
      step(ins, stack, out);
    }
  }
  return { out, stack };
}

function firstDifference(expected, actual) {
  const n = Math.max(expected.out.length, actual.out.length);
  for (let i = 0; i < n; i++) {
    if (expected.out[i] !== actual.out[i]) {
      return `output #${i + 1} differs: expected ${show(expected.out[i])}, got ${show(actual.out[i])}`;
    }
  }
  const same =
    expected.stack.length === actual.stack.length && expected.stack.every((v, i) => v === actual.stack[i]);
  if (same) return null;
  return `final stack differs: expected [${expected.stack.join(", ")}], got [${actual.stack.join(", ")}]`;
}

function show(value) {
  return value === undefined ? "nothing" : String(value);
}

/**
 * Checks one program: `{ bucket: "ok" | "invalid" | <bucket>, msg }`, where msg is one line.
 * `fixed` is a Set of buckets whose planted bug is repaired.
 */
export function checkProgram(program, fixed) {
  const invalid = validateProgram(program);
  if (invalid !== null) return { bucket: "invalid", msg: invalid };
  let actual;
  try {
    actual = runImplementation(program, fixed);
  } catch (err) {
    if (err instanceof PlantedFailure) return { bucket: err.bucket, msg: err.message };
    throw err;
  }
  const difference = firstDifference(runReference(program), actual);
  if (difference === null) return { bucket: "ok", msg: "implementation agrees with the reference" };
  return { bucket: "wrong-result", msg: difference };
}
