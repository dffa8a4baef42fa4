// Yes/no confirmation before anything that discards coverage. Without a terminal to ask, the
// answer is no unless --yes was given: an unattended sweep must never guess.
import { createInterface } from "node:readline";
import type { Confirm } from "../sweep/session/campaign.ts";

export function makeConfirm(yes: boolean, input: NodeJS.ReadStream = process.stdin, output: NodeJS.WriteStream = process.stderr): Confirm {
  return async (question) => {
    if (yes) {
      output.write(`${question}  [--yes]\n`);
      return true;
    }
    if (!input.isTTY) {
      output.write(`${question}\n  (no terminal to ask and --yes not given — refusing to guess)\n`);
      return false;
    }
    const rl = createInterface({ input, output });
    try {
      const answer = await new Promise<string | null>((resolve) => {
        rl.once("close", () => resolve(null));
        rl.question(`${question} [y/N] `, resolve);
      });
      return answer !== null && /^(y|yes)$/i.test(answer.trim());
    } finally {
      rl.close();
    }
  };
}
