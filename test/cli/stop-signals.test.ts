// SIGINT and SIGTERM as one stop: real signals sent to this process while a command runs under
// withSignalStop. The first aborts the signal (its reason names it) after the words and the
// command's listeners heard it; later ones are only heard; the handlers go with the command.
import assert from "node:assert/strict";
import { once } from "node:events";
import { test } from "node:test";
import { signalLabel, withSignalStop } from "../../src/cli/stop-signals.ts";

/** Sends `sig` to this process and waits until a handler installed for it ran. */
async function raise(sig: NodeJS.Signals): Promise<void> {
  const heard = once(process, sig);
  // A signal handler does not keep the event loop alive; this timer does, until the signal came.
  const alive = setTimeout(() => assert.fail(`${sig} did not arrive`), 10_000);
  process.kill(process.pid, sig);
  await heard;
  clearTimeout(alive);
}

test("the first signal aborts the one AbortSignal; each later one is heard, not acted on twice", async () => {
  const before = { SIGINT: process.listenerCount("SIGINT"), SIGTERM: process.listenerCount("SIGTERM") };
  const heard: string[] = [];
  const result = await withSignalStop(
    async ({ signal, onSignal }) => {
      onSignal((sig, again) => heard.push(`command ${sig} again=${again} aborted=${signal.aborted}`));
      assert.equal(process.listenerCount("SIGINT"), before.SIGINT + 1);
      assert.equal(process.listenerCount("SIGTERM"), before.SIGTERM + 1);
      await raise("SIGTERM");
      assert.equal(signal.aborted, true);
      assert.equal(signal.reason, "SIGTERM");
      await raise("SIGINT");
      await raise("SIGINT");
      assert.equal(signal.reason, "SIGTERM", "a later signal changes nothing about the stop");
      return 42;
    },
    { stopping: (sig) => heard.push(`stopping ${sig}`), again: (sig) => heard.push(`again ${sig}`) },
  );
  assert.equal(result, 42);
  assert.deepEqual(heard, [
    "stopping SIGTERM",
    "command SIGTERM again=false aborted=false",
    "again SIGINT",
    "command SIGINT again=true aborted=true",
    "again SIGINT",
    "command SIGINT again=true aborted=true",
  ]);
  assert.deepEqual({ SIGINT: process.listenerCount("SIGINT"), SIGTERM: process.listenerCount("SIGTERM") }, before, "the handlers went with the command");
});

test("the handlers also go when the command fails", async () => {
  const before = process.listenerCount("SIGINT");
  await assert.rejects(
    withSignalStop(async () => {
      throw new Error("the command failed");
    }),
    /the command failed/,
  );
  assert.equal(process.listenerCount("SIGINT"), before);
});

test("SIGINT is Ctrl-C to the user; other signals keep their names", () => {
  assert.equal(signalLabel("SIGINT"), "Ctrl-C");
  assert.equal(signalLabel("SIGTERM"), "SIGTERM");
});
