// What a campaign leaves in the corpus's hidden state directory beyond what is meant to outlive
// it (the explored ledger, the findings and the growth history): after a clean end, nothing.
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** Entries under CORPUS/.fuzzfleet other than explored/, findings/ and history/ (and their contents), plus any other hidden corpus entry. */
export function campaignStateLeft(corpus: string): string[] {
  const hidden = readdirSync(corpus).filter((n) => n.startsWith(".") && n !== ".fuzzfleet");
  const state = join(corpus, ".fuzzfleet");
  if (!existsSync(state)) return hidden;
  return [...hidden, ...readdirSync(state).filter((n) => n !== "explored" && n !== "findings" && n !== "history").map((n) => `.fuzzfleet/${n}`)];
}
