// Which role the explore options make, and what each role decides without a socket: who owns the
// campaign (the lock, the export, the hidden state), who serves with a token of its own, how its
// log lines are tagged, and the rank a launched submaster asks for.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { UsageError } from "../../src/errors.ts";
import type { ExploreOptions } from "../../src/explore/command/options.ts";
import { MASTER_RANK_ENV, requestedRank } from "../../src/explore/command/participant.ts";
import { roleOf } from "../../src/explore/command/roles.ts";

const options = (over: Partial<ExploreOptions>): ExploreOptions => ({
  inputDir: "in",
  corpusDir: "corpus",
  target: ["./target", "@@"],
  slots: 1,
  timeoutSeconds: 1,
  maxIdleSeconds: 1,
  wallTimeoutSeconds: 0,
  simulate: false,
  port: null,
  bind: null,
  token: undefined,
  statsJson: null,
  resumeEpoch: null,
  leaseTtlSeconds: null,
  signal: new AbortController().signal,
  ...over,
});

const noLinks = { hub: null, remote: null, rootLink: null };

describe("explore roles", () => {
  it("no --masters and no --join make a lone master: it owns the campaign, and serves with a token only with --port", () => {
    const state = mkdtempSync(join(tmpdir(), "fuzzfleet-roles-"));
    try {
      const alone = roleOf(options({}));
      assert.deepEqual([alone.kind, alone.ownsCampaign, alone.tag(0), alone.peers(noLinks)], ["single", true, "[explore]", []]);
      assert.equal(alone.servingToken(state), null);
      const serving = roleOf(options({ port: 0, token: "t".repeat(32) })).servingToken(state);
      assert.equal(serving?.token, "t".repeat(32));
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });

  it("--masters N with --port make the root: it owns the campaign and always serves with a token", () => {
    const state = mkdtempSync(join(tmpdir(), "fuzzfleet-roles-"));
    try {
      const root = roleOf(options({ masters: 3, port: 0, token: "r".repeat(32) }));
      assert.deepEqual([root.kind, root.ownsCampaign, root.tag(0), root.peers(noLinks)], ["root", true, "[explore r0]", []]);
      assert.equal(root.servingToken(state)?.token, "r".repeat(32));
    } finally {
      rmSync(state, { recursive: true, force: true });
    }
  });

  it("--masters N without --port is refused with the fix", () => {
    assert.throws(() => roleOf(options({ masters: 2 })), (err: unknown) => {
      assert.ok(err instanceof UsageError);
      assert.equal(err.message, "--masters needs --port: the other masters join the root on that port");
      return true;
    });
  });

  it("--join makes a submaster: it borrows the root's campaign and serves with the root's token", () => {
    const sub = roleOf(options({ join: { host: "root.example", port: 7000 }, port: 0 }));
    assert.deepEqual([sub.kind, sub.ownsCampaign, sub.tag(2), sub.peers(noLinks)], ["participant", false, "[explore r2]", []]);
    assert.equal(sub.servingToken("/nonexistent"), null);
  });

  it("a launched submaster asks for the rank in its environment; anything but a rank >= 1 is refused", () => {
    assert.equal(requestedRank({}), null);
    assert.equal(requestedRank({ [MASTER_RANK_ENV]: " 4 " }), 4);
    for (const bad of ["0", "-1", "x", "1.5", ""]) {
      assert.throws(() => requestedRank({ [MASTER_RANK_ENV]: bad }), UsageError, JSON.stringify(bad));
    }
  });
});
