// The known name a misspelt one most likely meant (`lane` for `lanes`, `wieght` for `weight`), for
// the "did you mean" of a config error. Plain edit distance: the names are few and short.

/** The candidate closest to `name` within a small edit distance, else null (ties: the first). */
export function closestName(name: string, candidates: readonly string[]): string | null {
  const limit = name.length <= 3 ? 1 : 2;
  let best: { name: string; distance: number } | null = null;
  for (const c of candidates) {
    const d = editDistance(name.toLowerCase(), c.toLowerCase());
    if (d <= limit && (best === null || d < best.distance)) best = { name: c, distance: d };
  }
  return best?.name ?? null;
}

/** Levenshtein distance: insertions, deletions and substitutions of one character each cost 1. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}
