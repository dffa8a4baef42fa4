// The Kubernetes examples' manifests, read as plain JSON and checked against the Kubernetes API's
// own schemas (kubernetes-models, generated from the API's OpenAPI definitions): for the tests of
// examples/kubernetes/ and examples/kubernetes/no-rwx/.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Job } from "kubernetes-models/batch/v1/Job";
import { PersistentVolumeClaim } from "kubernetes-models/v1/PersistentVolumeClaim";
import { Secret } from "kubernetes-models/v1/Secret";
import { Service } from "kubernetes-models/v1/Service";
import { StatefulSet } from "kubernetes-models/apps/v1/StatefulSet";

/** A parsed manifest: its shape is what the schemas check. */
export type Manifest = any; // the manifests are read as plain JSON

const MODELS: Record<string, new (data: Manifest) => { validate(): void }> = {
  "v1/Secret": Secret,
  "v1/PersistentVolumeClaim": PersistentVolumeClaim,
  "v1/Service": Service,
  "apps/v1/StatefulSet": StatefulSet,
  "batch/v1/Job": Job,
};

/** Every `*.json` manifest of `dir`, by file name. */
export function loadManifests(dir: string): Map<string, Manifest> {
  const out = new Map<string, Manifest>();
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".json"))) out.set(name, JSON.parse(readFileSync(join(dir, name), "utf8")));
  return out;
}

/** Throws unless `m` is a valid object of its kind by the API's schema. */
export function validateManifest(m: Manifest): void {
  const Model = MODELS[`${m.apiVersion}/${m.kind}`];
  assert.ok(Model, `no schema for ${m.apiVersion} ${m.kind}`);
  new Model(m).validate();
}
