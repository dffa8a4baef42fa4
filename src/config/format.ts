// Number printing shared by every report, so local and remote output read the same.

/** An integer with comma thousands separators: 10002983 -> "10,002,983". Non-integers are rounded. */
export function formatInt(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  const rounded = Math.round(n);
  const digits = String(Math.abs(rounded));
  const grouped = digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return rounded < 0 ? `-${grouped}` : grouped;
}

/** A rate (seeds/s, execs/s) with one decimal, or `-` when there is no estimate yet. */
export function formatRate(rate: number | null): string {
  if (rate === null || !Number.isFinite(rate)) return "-";
  return rate.toFixed(1);
}

/** `n` grouped by thousands with its noun: "1 hit", "1,490 finds" (`plural` when adding "s" is wrong). */
export function counted(n: number, singular: string, plural = `${singular}s`): string {
  return `${formatInt(n)} ${n === 1 ? singular : plural}`;
}

/** A time of day as HH:MM:SS (local time), the stamp of every console line. */
export function clock(date: Date = new Date()): string {
  return date.toTimeString().slice(0, 8);
}
