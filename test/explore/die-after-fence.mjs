// Test-only death of a master between a commit fence and its completion, loaded into a fuzzfleet
// master with `node --import <this file>` (NODE_OPTIONS): production code carries no seam for it.
// It wraps LeaseTable.prototype.beginCommit of the compiled module the CLI itself loads (same URL,
// so the same class):
//   FUZZFLEET_TEST_DIE_AFTER_FENCE=N   the process SIGKILLs itself as soon as its Nth commit fence
//                                      passed: the record is `committing` on disk (the journal
//                                      line is written before the table answers), its children
//                                      staged and not public, the task never completed
const dieAfter = Number(process.env.FUZZFLEET_TEST_DIE_AFTER_FENCE ?? 0) || 0;

if (dieAfter > 0) {
  const { LeaseTable } = await import(new URL("../../dist/explore/state/lease-table.js", import.meta.url).href);
  const beginCommit = LeaseTable.prototype.beginCommit;
  let passed = 0;
  LeaseTable.prototype.beginCommit = function (...args) {
    const ok = beginCommit.apply(this, args);
    if (ok && ++passed === dieAfter) process.kill(process.pid, "SIGKILL");
    return ok;
  };
}
