#!/usr/bin/python3
"""A cross-object lint of herd's rendered manifests: the mistakes a schema cannot see because
they sit between objects, or between an object and herd itself.

    lint.py DIR --herd PATH [--external-secret NAME ...]

renders DIR with `kubectl kustomize` and prints one line per problem (exit 1), or nothing
(exit 0). What it checks, and why, is in deploy/k8s/README.md ("The lint").
"""
import argparse
import concurrent.futures
import functools
import json
import os
import re
import subprocess
import sys
import tempfile

import manifests

WORKLOAD_KINDS = ("StatefulSet", "Job", "Deployment", "DaemonSet")
HERD_ROLES = ("scheduler", "server", "worker", "job")
CHECKPOINT_TIMEOUT_DEFAULT_MS = 10 * 60 * 1000  # job.proto: CheckpointPolicy.timeout_ms
JOBSPEC_CONFIGMAP = "herd-job"                   # before kustomize's hash suffix
JOBSPEC_KEY = "job.yaml"
CONFIG_ERROR_EXIT = 2                            # cli/command.h: kExitUsage
JOB_ENDED_EXIT = 3                               # cli/command.h: kExitJobEnded
HERD_NON_FLAG_ENV = {"HERD_LOG_LEVEL"}              # read by common/logging.cc, not a flag
SCRAPE_ANNOTATION = "prometheus.io/scrape"
SCRAPE_PORT_ANNOTATION = "prometheus.io/port"
METRICS_PORT_NAME = "metrics"
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
# What a field reference of the Downward API gives a pod, for --check-args offline.
FIELD_PLACEHOLDERS = {
    "metadata.name": "{workload}-0",
    "metadata.namespace": "default",
    "metadata.labels['apps.kubernetes.io/pod-index']": "0",
    "metadata.annotations['batch.kubernetes.io/job-completion-index']": "0",
    "status.podIP": "10.0.0.1",
    "spec.nodeName": "node-0",
}


def name_of(obj):
    return obj.get("metadata", {}).get("name", "?")


def where(obj):
    return f"{obj.get('kind')} {name_of(obj)}"


def pod_spec(obj):
    return obj["spec"]["template"]["spec"] if obj.get("kind") in WORKLOAD_KINDS else None


def pod_labels(obj):
    return obj["spec"]["template"].get("metadata", {}).get("labels", {}) or {}


def selects(selector, labels):
    """A Service's selector (a plain map) or a LabelSelector, against a pod's labels. An empty
    LabelSelector selects every pod (a NetworkPolicy's podSelector: {})."""
    if selector is None:
        return False
    if "matchExpressions" in selector:
        return False  # herd's manifests use matchLabels only: an expression is a finding
    match = selector.get("matchLabels", {}) if "matchLabels" in selector else selector
    return all(labels.get(k) == v for k, v in match.items())


def all_containers(spec):
    return list(spec.get("initContainers", []) or []) + list(spec.get("containers", []) or [])


def parse_duration_s(text):
    """herd's duration flags: '300' (seconds), '90s', '5m', '1h', '500ms'."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", str(text).strip())
    if not m:
        return None
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    return float(m.group(1)) * scale


def port_of(address):
    m = re.fullmatch(r".*:(\d+)", address or "")
    return int(m.group(1)) if m else None


class Lint:
    def __init__(self, objects, herd, external_secrets=()):
        self.objects = objects
        self.herd = herd
        self.external_secrets = set(external_secrets)
        self.problems = []
        self.by_kind = {}
        for o in objects:
            self.by_kind.setdefault(o.get("kind"), {})[name_of(o)] = o
        self.workloads = [o for o in objects if o.get("kind") in WORKLOAD_KINDS]

    def problem(self, text):
        self.problems.append(text)

    def run(self):
        self.check_selectors()
        self.check_references()
        self.check_variables()
        self.check_ports_and_probes()
        self.check_metrics()
        spec = self.check_jobspec()
        if spec is not None:
            self.check_against_jobspec(spec)
        self.check_workers_job()
        self.check_service_accounts()
        self.check_one_image()
        self.check_environment_names()
        self.check_args()
        return self.problems

    # --- selectors ---------------------------------------------------------------------
    def check_selectors(self):
        for svc in self.by_kind.get("Service", {}).values():
            sel = svc["spec"].get("selector")
            if not any(selects(sel, pod_labels(w)) for w in self.workloads):
                self.problem(f"Service {name_of(svc)}: its selector {sel} selects no pod")
        for w in self.workloads:
            sel = w["spec"].get("selector")
            if w["kind"] in ("StatefulSet", "Deployment") and not selects(sel, pod_labels(w)):
                self.problem(f"{where(w)}: its selector {sel} does not match its pod labels "
                             f"{pod_labels(w)}")
        for pdb in self.by_kind.get("PodDisruptionBudget", {}).values():
            sel = pdb["spec"].get("selector")
            if not any(selects(sel, pod_labels(w)) for w in self.workloads):
                self.problem(f"PodDisruptionBudget {name_of(pdb)}: its selector selects no pod")
        for np in self.by_kind.get("NetworkPolicy", {}).values():
            target = np["spec"].get("podSelector", {})
            peers = [p.get("podSelector") for rule in np["spec"].get("ingress", []) or []
                     for p in rule.get("from", []) or [] if "podSelector" in p]
            for w in self.workloads:
                if not selects(target, pod_labels(w)):
                    self.problem(f"NetworkPolicy {name_of(np)} does not cover the pods of "
                                 f"{where(w)}: they would take traffic from anyone")
                elif not any(selects(p, pod_labels(w)) for p in peers):
                    self.problem(f"NetworkPolicy {name_of(np)} does not admit the pods of "
                                 f"{where(w)}: the job's own traffic would be dropped")

    # --- references ----------------------------------------------------------------------
    def exists(self, kind, name):
        if kind == "Secret" and name in self.external_secrets:
            return True
        return name in self.by_kind.get(kind, {})

    def check_references(self):
        for w in self.workloads:
            spec = pod_spec(w)
            claims = {t["metadata"]["name"] for t in w["spec"].get("volumeClaimTemplates", [])}
            volumes = {v["name"]: v for v in spec.get("volumes", []) or []}
            for v in volumes.values():
                for key, kind, field in (("secret", "Secret", "secretName"),
                                         ("configMap", "ConfigMap", "name"),
                                         ("persistentVolumeClaim", "PersistentVolumeClaim",
                                          "claimName")):
                    if key in v and not self.exists(kind, v[key].get(field)):
                        self.problem(f"{where(w)}: volume {v['name']} refers to {kind} "
                                     f"{v[key].get(field)}, which does not exist")
            for v in volumes.values():
                mode = (v.get("secret") or {}).get("defaultMode", 0o644)
                ctx = spec.get("securityContext") or {}
                if "secret" in v and not mode & 0o004 and ctx.get("runAsUser", 0) != 0 and \
                        "fsGroup" not in ctx:
                    self.problem(f"{where(w)}: Secret volume {v['name']} has mode "
                                 f"{mode:04o} but the pod sets no fsGroup: its non-root user "
                                 f"cannot read it")
            sa = spec.get("serviceAccountName")
            if sa and not self.exists("ServiceAccount", sa):
                self.problem(f"{where(w)}: ServiceAccount {sa} does not exist")
            if w["kind"] == "StatefulSet" and not self.exists("Service", w["spec"]["serviceName"]):
                self.problem(f"{where(w)}: serviceName {w['spec']['serviceName']} is no Service")
            for c in all_containers(spec):
                for m in c.get("volumeMounts", []) or []:
                    if m["name"] not in volumes and m["name"] not in claims:
                        self.problem(f"{where(w)} container {c['name']}: volumeMount "
                                     f"{m['name']} has no volume")
                for e in c.get("env", []) or []:
                    ref = (e.get("valueFrom") or {})
                    for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
                        if key in ref and not ref[key].get("optional") and \
                                not self.exists(kind, ref[key]["name"]):
                            self.problem(f"{where(w)} container {c['name']}: env {e['name']} "
                                         f"refers to {kind} {ref[key]['name']}, which does not "
                                         f"exist")

    # --- $(VAR) ----------------------------------------------------------------------------
    def check_variables(self):
        for w in self.workloads:
            for c in all_containers(pod_spec(w)):
                defined = set()
                for e in c.get("env", []) or []:
                    for var in VAR_REF.findall(str(e.get("value", ""))):
                        if var not in defined:
                            self.problem(f"{where(w)} container {c['name']}: env {e['name']} "
                                         f"uses $({var}), which is not defined before it")
                    defined.add(e["name"])
                for field in ("command", "args"):
                    for arg in c.get(field, []) or []:
                        for var in VAR_REF.findall(str(arg)):
                            if var not in defined:
                                self.problem(f"{where(w)} container {c['name']}: {field} uses "
                                             f"$({var}), which is not defined")

    # --- ports and probes ----------------------------------------------------------------
    def check_ports_and_probes(self):
        for w in self.workloads:
            for c in all_containers(pod_spec(w)):
                ports = {p.get("name"): p["containerPort"] for p in c.get("ports", []) or []}
                env = resolved_env(c, w)
                listen = port_of(flag_value(c, env, "listen"))
                if listen is not None and listen not in ports.values():
                    self.problem(f"{where(w)} container {c['name']}: listens on port {listen} "
                                 f"but declares no such containerPort ({sorted(ports.values())})")
                for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
                    probe = c.get(kind)
                    if not probe:
                        continue
                    handler = probe.get("grpc") or probe.get("tcpSocket") or \
                        probe.get("httpGet") or {}
                    port = handler.get("port")
                    port = ports.get(port, port) if isinstance(port, str) else port
                    if port not in ports.values():
                        self.problem(f"{where(w)} container {c['name']}: {kind} port {port} is "
                                     f"not a containerPort")
                    elif listen is not None and port != listen:
                        self.problem(f"{where(w)} container {c['name']}: {kind} port {port} is "
                                     f"not the --listen port {listen}")
        for svc in self.by_kind.get("Service", {}).values():
            backends = [w for w in self.workloads
                        if selects(svc["spec"].get("selector"), pod_labels(w))]
            for sp in svc["spec"].get("ports", []):
                target = sp.get("targetPort", sp["port"])
                for w in backends:
                    declared = [p for c in all_containers(pod_spec(w))
                                for p in c.get("ports", []) or []]
                    if not any(p.get("name") == target or p["containerPort"] == target
                               for p in declared):
                        self.problem(f"Service {name_of(svc)}: targetPort {target} is no port "
                                     f"of {where(w)}")

    # --- metrics ---------------------------------------------------------------------------
    def check_metrics(self):
        """A pod annotated for scraping: the annotated port is a declared containerPort (named
        `metrics`), a herd container serves --metrics-listen on exactly that port, and the
        NetworkPolicy that covers the pod admits it. Any one of them off and Prometheus finds
        nothing, which a cluster shows only as an empty dashboard."""
        for w in self.workloads:
            notes = w["spec"]["template"].get("metadata", {}).get("annotations", {}) or {}
            if str(notes.get(SCRAPE_ANNOTATION, "")).lower() != "true":
                continue
            containers = all_containers(pod_spec(w))
            text = str(notes.get(SCRAPE_PORT_ANNOTATION, ""))
            if not text.isdigit():
                self.problem(f"{where(w)}: annotated for scraping without a numeric "
                             f"{SCRAPE_PORT_ANNOTATION} ({text or 'none'})")
                continue
            scraped = int(text)
            declared = {p["containerPort"]: p.get("name") for c in containers
                        for p in c.get("ports", []) or []}
            if scraped not in declared:
                self.problem(f"{where(w)}: {SCRAPE_PORT_ANNOTATION} {scraped} is not a "
                             f"containerPort ({sorted(declared)})")
            elif declared[scraped] != METRICS_PORT_NAME:
                self.problem(f"{where(w)}: the scraped port {scraped} is not the containerPort "
                             f"named {METRICS_PORT_NAME} (it is named {declared[scraped]})")
            served = []
            for c in containers:
                listen = flag_value(c, resolved_env(c, w), "metrics-listen")
                if listen:
                    served.append(port_of(listen))
                    if port_of(listen) != scraped:
                        self.problem(f"{where(w)} container {c['name']}: its --metrics-listen "
                                     f"port {port_of(listen)} is not the scraped port {scraped}")
            if not served:
                self.problem(f"{where(w)}: annotated to be scraped on port {scraped}, but no "
                             f"container serves metrics (--metrics-listen or "
                             f"HERD_METRICS_LISTEN)")
            for np in self.by_kind.get("NetworkPolicy", {}).values():
                if not selects(np["spec"].get("podSelector", {}), pod_labels(w)):
                    continue
                ports = [p.get("port") for rule in np["spec"].get("ingress", []) or []
                         for p in rule.get("ports", []) or []]
                if scraped not in ports and declared.get(scraped) not in ports:
                    self.problem(f"NetworkPolicy {name_of(np)} admits no scrape of port "
                                 f"{scraped} of {where(w)}: Prometheus would be dropped")

    # --- the JobSpec -------------------------------------------------------------------
    def jobspec_configmap(self):
        for name, cm in self.by_kind.get("ConfigMap", {}).items():
            if name == JOBSPEC_CONFIGMAP or name.startswith(JOBSPEC_CONFIGMAP + "-"):
                return cm
        return None

    def check_jobspec(self):
        cm = self.jobspec_configmap()
        if cm is None or JOBSPEC_KEY not in cm.get("data", {}):
            self.problem(f"no ConfigMap {JOBSPEC_CONFIGMAP} with key {JOBSPEC_KEY}: the "
                         f"JobSpec is missing")
            return None
        rc, out, err = validate_cached(self.herd, cm["data"][JOBSPEC_KEY])
        if rc != 0:
            self.problem(f"ConfigMap {name_of(cm)}: the JobSpec does not pass herd job "
                         f"validate: {err}")
            return None
        return json.loads(out)

    def check_against_jobspec(self, spec):
        workers = self.by_kind.get("Job", {}).get("herd-workers")
        if workers is None:
            self.problem("no Job herd-workers: the job has no workers")
        else:
            for field in ("completions", "parallelism"):
                if workers["spec"].get(field) != spec["workers"]:
                    self.problem(f"Job herd-workers: {field} {workers['spec'].get(field)} is "
                                 f"not the JobSpec's workers {spec['workers']}")
        shards = self.by_kind.get("StatefulSet", {}).get("herd-shard")
        replicas = shards["spec"].get("replicas", 1) if shards else 0
        if replicas != spec["servers"]:
            self.problem(f"StatefulSet herd-shard: {replicas} replicas, but the JobSpec has "
                         f"servers {spec['servers']}")
        timeout_s = (int(spec["checkpoint"]["timeoutMs"]) or CHECKPOINT_TIMEOUT_DEFAULT_MS) / 1e3
        ckpt_dir = spec["checkpoint"]["dir"]
        for w in self.workloads:
            for c in pod_spec(w)["containers"]:
                env = resolved_env(c, w)
                role = (c.get("args") or [None])[0]
                job = flag_value(c, env, "job")
                if job is not None and job != spec["name"]:
                    self.problem(f"{where(w)} container {c['name']}: HERD_JOB {job} is not the "
                                 f"JobSpec's name {spec['name']}")
                if role not in ("worker", "server"):
                    continue
                grace = parse_duration_s(flag_value(c, env, "preempt-grace") or "60s")
                period = pod_spec(w).get("terminationGracePeriodSeconds", 30)
                if grace is not None and grace <= timeout_s:
                    self.problem(f"{where(w)}: the preempt grace ({grace:g} s) does not cover "
                                 f"the checkpoint timeout ({timeout_s:g} s)")
                if grace is not None and period <= grace:
                    self.problem(f"{where(w)}: terminationGracePeriodSeconds {period} does not "
                                 f"cover the preempt grace ({grace:g} s): SIGKILL would cut "
                                 f"the checkpoint short")
                if ckpt_dir and not any(
                        (ckpt_dir + "/").startswith(m["mountPath"].rstrip("/") + "/")
                        for m in c.get("volumeMounts", []) or []):
                    self.problem(f"{where(w)} container {c['name']}: the checkpoint directory "
                                 f"{ckpt_dir} is on no mounted volume")

        self.check_torch_rendezvous(spec)

    # --- torch.distributed's env:// ------------------------------------------------------
    def check_torch_rendezvous(self, spec):
        """The workers' torch.distributed variables (a worker image that runs a torch.distributed
        script): WORLD_SIZE is the JobSpec's workers, RANK the completion index, and MASTER_ADDR
        names rank 0's pod (the workers' subdomain, or loopback on the host network) with
        MASTER_PORT one of its ports: otherwise init_process_group waits for ranks that never
        come, or for a store nobody serves."""
        workers = self.by_kind.get("Job", {}).get("herd-workers")
        if workers is None:
            return
        pod = pod_spec(workers)
        for c in pod["containers"]:
            env = resolved_env(c, workers)
            if "WORLD_SIZE" not in env and "MASTER_ADDR" not in env:
                continue
            if env.get("WORLD_SIZE") != str(spec["workers"]):
                self.problem(f"Job herd-workers container {c['name']}: WORLD_SIZE "
                             f"{env.get('WORLD_SIZE')} is not the JobSpec's workers "
                             f"{spec['workers']}")
            rank = next((e.get("value") for e in c.get("env", []) or [] if e["name"] == "RANK"),
                        None)
            if rank != "$(JOB_COMPLETION_INDEX)":
                self.problem(f"Job herd-workers container {c['name']}: RANK is {rank}, not the "
                             f"completion index $(JOB_COMPLETION_INDEX) (herd's rank)")
            addr = env.get("MASTER_ADDR", "")
            if pod.get("hostNetwork"):
                ok = addr in ("127.0.0.1", "localhost")
                want = "127.0.0.1 (the host network of one machine)"
            else:
                sub = pod.get("subdomain")
                want = f"herd-workers-0.{sub}" if sub else "rank 0's pod (no subdomain is set)"
                ok = bool(sub) and addr.split(".")[0:2] == ["herd-workers-0", sub] and any(
                    svc["spec"].get("clusterIP") == "None" and name_of(svc) == sub and
                    selects(svc["spec"].get("selector"), pod_labels(workers))
                    for svc in self.by_kind.get("Service", {}).values())
            if not ok:
                self.problem(f"Job herd-workers container {c['name']}: MASTER_ADDR {addr!r} is "
                             f"not rank 0's pod: want {want} with a headless Service of that "
                             f"name selecting the workers")
            port = env.get("MASTER_PORT")
            ports = {str(p.get("containerPort")) for p in c.get("ports", []) or []}
            if not pod.get("hostNetwork") and port not in ports:
                self.problem(f"Job herd-workers container {c['name']}: MASTER_PORT {port} is not "
                             f"a containerPort of the workers")

    # --- the workers' Job ----------------------------------------------------------------
    def check_workers_job(self):
        job = self.by_kind.get("Job", {}).get("herd-workers")
        if job is None:
            return
        s = job["spec"]
        if s.get("completionMode") != "Indexed":
            self.problem("Job herd-workers: completionMode must be Indexed (a rank per index)")
        rules = (s.get("podFailurePolicy") or {}).get("rules", [])
        for code, meaning in ((CONFIG_ERROR_EXIT, "a configuration error"),
                              (JOB_ENDED_EXIT, "the herd job has ended")):
            if not any(r["action"] == "FailJob" and
                       code in r.get("onExitCodes", {}).get("values", []) and
                       r.get("onExitCodes", {}).get("operator") == "In" for r in rules):
                self.problem(f"Job herd-workers: no podFailurePolicy rule fails the Job on "
                             f"exit {code} ({meaning})")
        if not any(r["action"] == "Ignore" and any(
                c.get("type") == "DisruptionTarget" for c in r.get("onPodConditions", []))
                   for r in rules):
            self.problem("Job herd-workers: no podFailurePolicy rule ignores DisruptionTarget "
                         "(preemption would count as a failure)")
        spec = pod_spec(job)
        shm = [v for v in spec.get("volumes", []) or []
               if (v.get("emptyDir") or {}).get("medium") == "Memory"]
        for c in spec["containers"]:
            if not any(m["mountPath"] == "/dev/shm" and m["name"] in {v["name"] for v in shm}
                       for m in c.get("volumeMounts", []) or []):
                self.problem(f"Job herd-workers container {c['name']}: /dev/shm is not a "
                             f"memory emptyDir (UCX's shared memory needs it)")

    def check_service_accounts(self):
        for sa in self.by_kind.get("ServiceAccount", {}).values():
            if sa.get("automountServiceAccountToken") is not False:
                self.problem(f"ServiceAccount {name_of(sa)} mounts an API token")
        for w in self.workloads:
            if pod_spec(w).get("automountServiceAccountToken") is not False:
                self.problem(f"{where(w)}: the pod mounts an API token")

    # --- herd's own flag parsing ---------------------------------------------------------
    def herd_containers(self):
        for w in self.workloads:
            for c in all_containers(pod_spec(w)):
                args = c.get("args") or []
                if not c.get("command") and args and args[0] in HERD_ROLES:
                    yield w, c

    def check_one_image(self):
        images = {}
        for w, c in self.herd_containers():
            images.setdefault(c.get("image"), []).append(f"{where(w)} container {c['name']}")
        if len(images) > 1:
            self.problem("herd's containers run different images: " + "; ".join(
                f"{image} in {', '.join(users)}" for image, users in sorted(images.items())))

    def check_environment_names(self):
        """A HERD_* variable that is no option's twin is ignored by herd: a typo
        (HERD_SCHEDULR) would silently leave the flag at its default."""
        for w, c in self.herd_containers():
            known = twins_of(self.herd, tuple(c["args"]))
            for e in c.get("env", []) or []:
                if e["name"].startswith("HERD_") and e["name"] not in known | HERD_NON_FLAG_ENV:
                    self.problem(f"{where(w)} container {c['name']}: env {e['name']} is no "
                                 f"option of `herd {' '.join(c['args'])}`: herd ignores it")

    def check_args(self):
        jobs = [(w, c, tuple(c["args"]), tuple(sorted(resolved_env(c, w).items())))
                for w, c in self.herd_containers()]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            results = list(pool.map(lambda j: check_args_cached(self.herd, j[2], j[3]), jobs))
        for (w, c, _, _), (rc, err) in zip(jobs, results):
            if rc != 0:
                self.problem(f"{where(w)} container {c['name']}: herd refuses its arguments "
                             f"(exit {rc}): {err}")


def resolved_env(container, workload):
    """The container's environment as the kubelet would build it: literal values with $(VAR)
    expanded from earlier entries, Downward API fields replaced by what they would give."""
    env = {}
    for e in container.get("env", []) or []:
        if "value" in e:
            env[e["name"]] = VAR_REF.sub(lambda m: env.get(m.group(1), m.group(0)),
                                         str(e["value"]))
        elif "fieldRef" in (e.get("valueFrom") or {}):
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            env[e["name"]] = FIELD_PLACEHOLDERS.get(path, "x").format(
                workload=name_of(workload))
        else:
            env[e["name"]] = "x"  # a Secret or ConfigMap key: its value is not known here
    return env


def flag_value(container, env, flag):
    """The value herd sees for --FLAG: the argument if given, else its environment twin."""
    args = container.get("args") or []
    for i, a in enumerate(args):
        if a == f"--{flag}" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(f"--{flag}="):
            return a.split("=", 1)[1]
    return env.get("HERD_" + flag.upper().replace("-", "_"))


@functools.lru_cache(maxsize=None)
def validate_cached(herd, text):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(text)
        f.flush()
        r = subprocess.run([herd, "job", "validate", "--json", f.name], capture_output=True,
                           text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr.strip()


@functools.lru_cache(maxsize=None)
def twins_of(herd, args):
    """The environment twins herd's --help lists for the command `args` names."""
    r = subprocess.run([herd, *args, "--help"], env={"PATH": os.environ.get("PATH", "")},
                       capture_output=True, text=True, timeout=60)
    return frozenset(re.findall(r"\(Env:(HERD_[A-Z0-9_]+)\)", r.stdout))


@functools.lru_cache(maxsize=None)
def check_args_cached(herd, args, env):
    full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **dict(env)}
    r = subprocess.run([herd, *args, "--check-args"], env=full, capture_output=True, text=True,
                       timeout=60)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", help="a kustomize directory (an overlay)")
    p.add_argument("--herd", required=True, help="the herd binary")
    p.add_argument("--external-secret", action="append", default=[],
                   help="a Secret the operator creates (may be referred to, not rendered)")
    a = p.parse_args()
    problems = Lint(manifests.render(a.dir), a.herd, a.external_secret).run()
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
