// The Kubernetes manifests of examples/kubernetes/, checked against the Kubernetes API's own
// schemas (kubernetes-models, generated from the API's OpenAPI definitions) and against what
// `fuzzfleet launch --launcher kubernetes` needs of them: the rank from each pod's ordinal, one
// shared ReadWriteMany volume at one path, the token from the Secret, the root's Service in front
// of the port it listens on. No cluster runs here.
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { launchPlace, roleOf } from "../../src/launch/launcher.ts";
import { ROOT } from "../helpers/campaign.ts";
import { loadManifests, type Manifest, validateManifest } from "./kubernetes-manifests.ts";

const DIR = join(ROOT, "examples/kubernetes");
const load = () => loadManifests(DIR);
const validate = validateManifest;

const env = (container: Manifest): Record<string, string> => Object.fromEntries(container.env.filter((e: Manifest) => "value" in e).map((e: Manifest) => [e.name, e.value]));

test("every manifest is a valid object of its kind by the Kubernetes API's schema", () => {
  const all = load();
  assert.deepEqual([...all.values()].map((m) => m.kind).sort(), ["Job", "PersistentVolumeClaim", "Secret", "Service", "StatefulSet"]);
  for (const [name, m] of all) {
    assert.doesNotThrow(() => validate(m), `${name}`);
    assert.ok(m.metadata.annotations["fuzzfleet.example/purpose"], `${name} says what it is for`);
  }
});

test("the validator refuses a broken manifest (a port that is no number, a Job without its template)", () => {
  const root = load().get("root-statefulset.json");
  root.spec.template.spec.containers[0].ports[0].containerPort = "ninety-nine";
  assert.throws(() => validate(root), /containerPort must be integer/);
  const job = load().get("workers-job.json");
  delete job.spec.template;
  assert.throws(() => validate(job), /template/);
});

test("the manifests give launch what it needs: ranks from the ordinals, one shared volume, the Secret, the root's Service", () => {
  const all = load();
  const root = all.get("root-statefulset.json");
  const job = all.get("workers-job.json");
  const service = all.get("root-service.json");
  const claim = all.get("volume.json");
  const secret = all.get("secret.json");
  assert.deepEqual(claim.spec.accessModes, ["ReadWriteMany"], "every pod writes into the campaign directory");
  assert.equal(secret.stringData.token, "", "the example ships no usable secret: an empty token is refused until one is set");

  const rootPod = root.spec.template.spec;
  const workerPod = job.spec.template.spec;
  const [rc, wc] = [rootPod.containers[0], workerPod.containers[0]];
  for (const pod of [rootPod, workerPod]) assert.equal(pod.volumes[0].persistentVolumeClaim.claimName, claim.metadata.name);
  assert.equal(rc.volumeMounts[0].mountPath, wc.volumeMounts[0].mountPath, "the same path on every host");
  assert.equal(rc.workingDir, rc.volumeMounts[0].mountPath, "the config is found in the shared directory");
  assert.equal(wc.workingDir, rc.workingDir);
  for (const c of [rc, wc]) {
    const token = c.env.find((e: Manifest) => e.name === "FUZZFLEET_TOKEN");
    assert.deepEqual(token.valueFrom.secretKeyRef, { name: secret.metadata.name, key: "token" });
  }
  assert.equal(env(rc).FUZZFLEET_JOB_ID, env(wc).FUZZFLEET_JOB_ID, "one job id on every rank");

  // The root: rank 0 from its pod's ordinal; it listens on the port its Service forwards, and advertises the Service.
  assert.equal(root.spec.replicas, 1);
  assert.deepEqual(service.spec.selector, root.spec.template.metadata.labels);
  const args: string[] = rc.args;
  assert.equal(Number(args[args.indexOf("--port") + 1]), service.spec.ports[0].targetPort);
  assert.equal(rc.ports[0].containerPort, service.spec.ports[0].targetPort);
  assert.equal(args[args.indexOf("--advertise") + 1], service.metadata.name);
  const rootPlace = launchPlace("kubernetes", { ...env(rc), KUBERNETES_SERVICE_HOST: "10.96.0.1" }, `${root.metadata.name}-0`);
  assert.deepEqual([rootPlace.rank, rootPlace.jobId], [0, env(rc).FUZZFLEET_JOB_ID]);
  assert.deepEqual(roleOf("sweep", rootPlace.rank, 1), { kind: "coordinator" });

  // The workers: an Indexed Job; index k is rank k + 1, every rank below FUZZFLEET_RANKS.
  assert.equal(job.spec.completionMode, "Indexed");
  assert.equal(Number(env(wc).FUZZFLEET_RANKS), job.spec.completions + 1);
  assert.equal(env(rc).FUZZFLEET_RANKS, env(wc).FUZZFLEET_RANKS);
  for (let k = 0; k < job.spec.completions; k++) {
    const p = launchPlace("kubernetes", { ...env(wc), JOB_COMPLETION_INDEX: String(k) }, `${job.metadata.name}-${k}-x7k2p`);
    assert.equal(p.rank, k + 1);
    assert.deepEqual(roleOf("sweep", p.rank, 1), { kind: "worker", master: 0 });
  }
  assert.deepEqual(rc.args.slice(rc.args.indexOf("--")), wc.args.slice(wc.args.indexOf("--")), "the same campaign after --");
});
