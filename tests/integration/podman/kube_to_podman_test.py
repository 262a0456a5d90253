#!/usr/bin/python3
"""scripts/kube-to-podman.py on a small rendered set of objects: what the controllers and the
kubelet would do (pods per replica and per index, claims, Downward API, $(VAR)), the host
network's ports and addresses, Secrets and emptyDirs as folders, the JobSpec changed by --set,
and a kind it has no rule for refused. The podman run itself is scripts/podman-run.sh."""
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "kube-to-podman.py")

OBJECTS = """
apiVersion: v1
kind: ConfigMap
metadata: {name: job}
data:
  job.yaml: |
    name: demo
    mode: ps_sync
    workers: 2
    training: {epochs: 1}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
data: {token: c2VjcmV0}
---
apiVersion: v1
kind: Service
metadata: {name: sched}
spec: {selector: {role: scheduler}, ports: [{port: 7070}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-us}
spec: {podSelector: {}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sched}
spec:
  replicas: 1
  serviceName: sched
  selector: {matchLabels: {role: scheduler}}
  template:
    metadata: {labels: {role: scheduler}}
    spec:
      containers:
      - name: s
        image: herd:any
        args: [scheduler, --listen, "0.0.0.0:7070"]
        ports: [{containerPort: 7070}]
        readinessProbe: {grpc: {port: 7070}}
  volumeClaimTemplates:
  - metadata: {name: state}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: shard}
spec:
  replicas: 2
  serviceName: shards
  selector: {matchLabels: {role: shard}}
  template:
    metadata: {labels: {role: shard}}
    spec:
      containers:
      - name: s
        image: herd:any
        args: [server]
        env:
        - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: INDEX, valueFrom: {fieldRef: {fieldPath: "metadata.labels['apps.kubernetes.io/pod-index']"}}}
        - {name: HERD_SCHEDULER, value: "sched.ns.svc.cluster.local:7070"}
        - {name: HERD_LISTEN, value: "0.0.0.0:7071"}
        - {name: HERD_ADVERTISE, value: "$(POD).shards:7071"}
        - {name: HERD_SHARD, value: "$(INDEX)"}
        ports: [{containerPort: 7071}]
  volumeClaimTemplates:
  - metadata: {name: state}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: workers}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  backoffLimitPerIndex: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: w
        image: herd:any
        args: [worker]
        env:
        - {name: JOB_COMPLETION_INDEX, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
        - {name: HERD_RANK, value: "$(JOB_COMPLETION_INDEX)"}
        - {name: HERD_NAME, value: "worker-$(JOB_COMPLETION_INDEX)"}
        - {name: HERD_SCHEDULER, value: "127.0.0.1:7070"}
        - {name: LITERAL, value: "$$(NOT_EXPANDED)"}
        volumeMounts:
        - {name: token, mountPath: /run/token, readOnly: true}
        - {name: shm, mountPath: /dev/shm}
        - {name: tmp, mountPath: /tmp}
      volumes:
      - {name: token, secret: {secretName: token}}
      - {name: shm, emptyDir: {medium: Memory}}
      - {name: tmp, emptyDir: {}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: submit}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: submit
        image: herd:any
        args: [job, submit, /etc/job/job.yaml]
        env: [{name: HERD_SCHEDULER, value: "sched:7070"}]
        volumeMounts: [{name: job, mountPath: /etc/job}]
      volumes: [{name: job, configMap: {name: job}}]
"""


def convert(text, *extra):
    files = tempfile.mkdtemp()
    client = os.path.join(files, "client.json")
    run = subprocess.run(
        [sys.executable, SCRIPT, "--image", "localhost/herd:test", "--files-dir", files,
         "--port-base", "31000", "--client", client, *extra],
        input=text, capture_output=True, text=True, timeout=60)
    return run, files


def by_kind(out, kind):
    return {o["metadata"]["name"]: o for o in yaml.safe_load_all(out) if o and o["kind"] == kind}


def env_of(pod):
    return {v["name"]: v["value"] for v in pod["spec"]["containers"][0].get("env", [])}


class KubeToPodmanTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        run, cls.files = convert(OBJECTS, "--set", "training.epochs=3")
        if run.returncode != 0:
            raise AssertionError(run.stderr)
        cls.pods = by_kind(run.stdout, "Pod")
        cls.claims = by_kind(run.stdout, "PersistentVolumeClaim")
        cls.config_maps = by_kind(run.stdout, "ConfigMap")
        cls.kinds = {o["kind"] for o in yaml.safe_load_all(run.stdout) if o}

    def test_controllers_pods_and_claims(self):
        self.assertEqual(sorted(self.pods), ["sched-0", "shard-0", "shard-1", "submit", "workers-0", "workers-1"])
        self.assertEqual(sorted(self.claims), ["state-sched-0", "state-shard-0", "state-shard-1"])
        claim = {v["name"]: v for v in self.pods["shard-1"]["spec"]["volumes"]}["state"]
        self.assertEqual(claim["persistentVolumeClaim"]["claimName"], "state-shard-1")
        self.assertEqual(self.pods["sched-0"]["spec"]["restartPolicy"], "Always")
        self.assertEqual(self.pods["workers-1"]["spec"]["restartPolicy"], "OnFailure")
        self.assertNotIn("Service", self.kinds)
        self.assertNotIn("NetworkPolicy", self.kinds)
        self.assertNotIn("Secret", self.kinds)

    def test_downward_api_and_variables(self):
        for index in (0, 1):
            env = env_of(self.pods[f"workers-{index}"])
            self.assertEqual(env["HERD_RANK"], str(index))
            self.assertEqual(env["HERD_NAME"], f"worker-{index}")
            self.assertEqual(env["LITERAL"], "$(NOT_EXPANDED)")
            self.assertEqual(env_of(self.pods[f"shard-{index}"])["HERD_SHARD"], str(index))

    def test_loopback_ports_and_addresses(self):
        scheduler = "127.0.0.1:31000"  # the first declared port gets the first port
        self.assertEqual(self.pods["sched-0"]["spec"]["containers"][0]["args"][-1], scheduler)
        shard0, shard1 = env_of(self.pods["shard-0"]), env_of(self.pods["shard-1"])
        self.assertEqual(shard0["HERD_SCHEDULER"], scheduler)  # a Service's qualified name
        self.assertEqual(env_of(self.pods["workers-0"])["HERD_SCHEDULER"], scheduler)  # loopback
        self.assertEqual(env_of(self.pods["submit"])["HERD_SCHEDULER"], scheduler)  # short name
        # Two replicas declaring one port: each its own, listening and advertised.
        self.assertNotEqual(shard0["HERD_LISTEN"], shard1["HERD_LISTEN"])
        for env in (shard0, shard1):
            self.assertEqual(env["HERD_LISTEN"], env["HERD_ADVERTISE"])
            self.assertTrue(env["HERD_LISTEN"].startswith("127.0.0.1:"))
        for pod in self.pods.values():
            self.assertTrue(pod["spec"]["hostNetwork"])
            container = pod["spec"]["containers"][0]
            self.assertNotIn("ports", container)
            self.assertNotIn("readinessProbe", container)
            self.assertEqual(container["image"], "localhost/herd:test")
            self.assertEqual(container["imagePullPolicy"], "Never")

    def test_secret_and_empty_dir_folders(self):
        volumes = {v["name"]: v for v in self.pods["workers-0"]["spec"]["volumes"]}
        self.assertNotIn("shm", volumes)  # /dev/shm: podman's own tmpfs
        with open(os.path.join(volumes["token"]["hostPath"]["path"], "token")) as f:
            self.assertEqual(f.read(), "secret")
        tmp0 = volumes["tmp"]["hostPath"]["path"]
        tmp1 = {v["name"]: v for v in self.pods["workers-1"]["spec"]["volumes"]}["tmp"]["hostPath"]["path"]
        self.assertNotEqual(tmp0, tmp1)
        self.assertEqual(os.stat(tmp0).st_mode & 0o777, 0o777)
        mounts = [m["mountPath"] for m in self.pods["workers-0"]["spec"]["containers"][0]["volumeMounts"]]
        self.assertNotIn("/dev/shm", mounts)

    def test_set_changes_the_jobspec(self):
        spec = yaml.safe_load(self.config_maps["job"]["data"]["job.yaml"])
        self.assertEqual(spec["training"]["epochs"], 3)
        self.assertEqual(spec["workers"], 2)

    def test_unknown_kind_is_refused(self):
        run, _ = convert(OBJECTS + "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec: {}\n")
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("DaemonSet d: no rule for this kind", run.stderr)


if __name__ == "__main__":
    unittest.main()
