import { rmSync } from "node:fs";
import Database from "better-sqlite3";
import { forgeLongCampaign } from "../test/store/long-store.ts";
import { rebuildBuildRanges } from "../src/store/build-ranges.ts";
import { openStore } from "../src/store/db.ts";
const n = Number(process.argv[2]);
const path = `/tmp/s37-mig-${n}.db`;
for (const s of ["", "-wal", "-shm"]) rmSync(path + s, { force: true });
let t = performance.now();
forgeLongCampaign(path, { chunks: n, lanes: ["a", "b"], seedsPerChunk: 1000, failures: 2000, hitsOf: (i) => 1 + (i % 50) });
console.log("forge", ((performance.now() - t) / 1000).toFixed(2), "s");
t = performance.now();
openStore(path, { journal: "wal" }).close();
console.log("full migration", ((performance.now() - t) / 1000).toFixed(2), "s");
const db = new Database(path);
for (let i = 0; i < 2; i++) {
  t = performance.now();
  db.transaction(() => rebuildBuildRanges(db))();
  console.log("rebuildBuildRanges", ((performance.now() - t) / 1000).toFixed(2), "s");
}
t = performance.now();
db.transaction(() => db.exec(`UPDATE failure SET last_app_build = COALESCE(
      (SELECT c.app_build FROM failure_seed fs JOIN chunk c ON c.id = fs.chunk_id WHERE fs.failure_id = failure.id ORDER BY fs.chunk_id DESC LIMIT 1),
      first_app_build)`))();
console.log("backfill", ((performance.now() - t) / 1000).toFixed(2), "s");
db.close();
