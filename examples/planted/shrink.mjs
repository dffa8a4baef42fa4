// Test-case minimisation: greedy chunk removal (delta debugging with halving chunk sizes) and
// literal simplification, repeated until neither changes anything. The result is 1-minimal:
// removing any single instruction, or simplifying any literal further, loses the failure.

/** Literals the shrinker tries, simplest first. */
const SIMPLE_LITERALS = [0, 1, -1, 2, -2];

function complexity(value) {
  return 2 * Math.abs(value) + (value < 0 ? 1 : 0);
}

/**
 * Shrinks `program` while `stillFails(candidate)` holds. `stillFails(program)` must hold on entry.
 * The caller's predicate decides what "the same failure" means (here: the same bucket).
 */
export function shrinkProgram(program, stillFails) {
  let current = program;
  let changed = true;
  while (changed) {
    changed = false;
    let chunk = 1;
    while (chunk * 2 <= current.length / 2) chunk *= 2;
    for (; chunk >= 1; chunk = Math.floor(chunk / 2)) {
      let i = 0;
      while (i < current.length) {
        const candidate = current.slice(0, i).concat(current.slice(i + chunk));
        if (stillFails(candidate)) {
          current = candidate;
          changed = true;
        } else {
          i += chunk;
        }
      }
    }
    for (let i = 0; i < current.length; i++) {
      const ins = current[i];
      if (ins.op !== "push") continue;
      for (const value of SIMPLE_LITERALS) {
        if (complexity(value) >= complexity(ins.arg)) break;
        const candidate = current.slice();
        candidate[i] = { op: "push", arg: value };
        if (stillFails(candidate)) {
          current = candidate;
          changed = true;
          break;
        }
      }
    }
  }
  return current;
}
