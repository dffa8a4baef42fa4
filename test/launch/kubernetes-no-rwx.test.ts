// The Kubernetes fleet without a ReadWriteMany volume (examples/kubernetes/no-rwx/), checked as the
// shared-volume example is (kubernetes.test.ts): against the Kubernetes API's own schemas
// (kubernetes-models), and against what the fleet needs: the coordinator's pod alone holds a
// volume (ReadWriteOnce), the workers only an emptyDir as their temporary directory, every worker
// dials the coordinator's Service with the example's Secret as its token, and runs the image's
// copy of the campaign, the one the coordinator's init container copies. No cluster runs here.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { EXIT } from "../../src/exit-codes.ts";
import { parseHostPort } from "../../src/net/address.ts";
import { ROOT } from "../helpers/campaign.ts";
import { loadManifests, type Manifest, validateManifest } from "./kubernetes-manifests.ts";

const DIR = join(ROOT, "examples/kubernetes/no-rwx");
const load = () => loadManifests(DIR);
const validate = validateManifest;

const envOf = (c: Manifest, name: string): Manifest => c.env.find((e: Manifest) => e.name === name);
const arg = (args: string[], flag: string): string => args[args.indexOf(flag) + 1]!;

test("every manifest of the fleet without RWX is a valid object of its kind by the Kubernetes API's schema", () => {
  const all = load();
  assert.deepEqual([...all.values()].map((m) => m.kind).sort(), ["Job", "Service", "StatefulSet"]);
  for (const [name, m] of all) {
    assert.doesNotThrow(() => validate(m), name);
    assert.ok(m.metadata.annotations["fuzzfleet.example/purpose"], `${name} says what it is for`);
  }
  const job = all.get("workers-job.json");
  job.spec.template.spec.volumes[0].emptyDir.sizeLimit = { gigabytes: 8 };
  assert.throws(() => validate(job), /sizeLimit/, "the validator sees a broken emptyDir");
});

test("only the coordinator's pod holds a volume: the workers have an emptyDir as their temporary directory and the image's copy of the campaign", () => {
  const all = load();
  const coordinator = all.get("coordinator-statefulset.json");
  const job = all.get("workers-job.json");
  const cpod = coordinator.spec.template.spec;
  const wpod = job.spec.template.spec;
  const [cc, wc] = [cpod.containers[0], wpod.containers[0]];

  // The coordinator: one replica, one ReadWriteOnce claim, mounted where it runs (its config, store, fuzzfleet-out/).
  assert.equal(coordinator.spec.replicas, 1);
  assert.equal(cpod.volumes, undefined, "its volume comes from its claim template");
  assert.equal(coordinator.spec.volumeClaimTemplates.length, 1);
  const claim = coordinator.spec.volumeClaimTemplates[0];
  assert.deepEqual(claim.spec.accessModes, ["ReadWriteOnce"], "no ReadWriteMany anywhere");
  assert.deepEqual(cc.volumeMounts, [{ name: claim.metadata.name, mountPath: cc.workingDir }]);

  // The workers: nothing but an emptyDir, which is their TMPDIR (where a worker runs its chunks).
  assert.equal(job.spec.template.spec.volumes.length, 1);
  const [scratch] = wpod.volumes;
  assert.deepEqual(Object.keys(scratch).sort(), ["emptyDir", "name"]);
  assert.deepEqual(wc.volumeMounts, [{ name: scratch.name, mountPath: envOf(wc, "TMPDIR").value }]);
  assert.equal(wc.resources.requests["ephemeral-storage"], scratch.emptyDir.sizeLimit, "the scheduler reserves what the emptyDir may hold");
  assert.equal(JSON.stringify(job).includes("persistentVolumeClaim"), false);

  // One campaign: the workers run in the image's copy, the one the coordinator's init container copies in at each start.
  const [init] = cpod.initContainers;
  assert.equal(init.image, cc.image);
  assert.equal(wc.image, cc.image);
  assert.deepEqual(init.command, ["cp", "-R", `${wc.workingDir}/.`, `${cc.workingDir}/`]);
  assert.deepEqual(init.volumeMounts, cc.volumeMounts);
});

test("every worker dials the coordinator's Service with the Secret's token; a worker that would be refused again fails the Job at once", () => {
  const all = load();
  const coordinator = all.get("coordinator-statefulset.json");
  const service = all.get("coordinator-service.json");
  const job = all.get("workers-job.json");
  const secret = JSON.parse(readFileSync(join(DIR, "..", "secret.json"), "utf8"));
  validate(secret);
  const cc = coordinator.spec.template.spec.containers[0];
  const wc = job.spec.template.spec.containers[0];

  assert.deepEqual(cc.args.slice(0, 1), ["coordinate"]);
  assert.deepEqual(wc.args.slice(0, 1), ["worker"]);
  const master = parseHostPort(arg(wc.args, "--master"));
  assert.deepEqual(master, { host: service.metadata.name, port: service.spec.ports[0].port });
  assert.deepEqual(service.spec.selector, coordinator.spec.template.metadata.labels);
  assert.equal(Number(arg(cc.args, "--port")), service.spec.ports[0].targetPort);
  assert.equal(cc.ports[0].containerPort, service.spec.ports[0].targetPort);
  assert.equal(arg(cc.args, "--bind"), "$(POD_IP)");
  assert.deepEqual(envOf(cc, "POD_IP").valueFrom, { fieldRef: { fieldPath: "status.podIP" } });
  for (const c of [cc, wc]) assert.deepEqual(envOf(c, "FUZZFLEET_TOKEN").valueFrom.secretKeyRef, { name: secret.metadata.name, key: "token" });

  assert.equal(job.spec.template.spec.restartPolicy, "Never", "a pod failure policy needs it");
  const [rule] = job.spec.podFailurePolicy.rules;
  assert.equal(rule.action, "FailJob");
  assert.deepEqual(rule.onExitCodes, { containerName: wc.name, operator: "In", values: [EXIT.usage, EXIT.refused] });
  assert.ok(!rule.onExitCodes.values.includes(EXIT.runtime), "a worker that lost the coordinator is started again");
});
