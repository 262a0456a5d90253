#!/usr/bin/python3
"""Turns rendered Kubernetes objects (kubectl kustomize output) into what `podman kube play`
runs on one host with the host network, loopback only. It does, once and statically, what a
cluster's controllers and kubelet would do, and nothing else:

- StatefulSet (replicas N) -> Pods NAME-0..NAME-(N-1), each with the pod-index label and one
  PersistentVolumeClaim per volumeClaimTemplate, named TEMPLATE-NAME-I as the controller names
  it, so a pod played again takes its own volume back.
- Job -> one Pod per completion index (NAME-I, or NAME for a non-indexed Job), with the
  `batch.kubernetes.io/job-completion-index` annotation and label and the JOB_COMPLETION_INDEX
  variable the Job controller adds; restartPolicy Never becomes OnFailure while the Job allows
  retries (the controller would replace a failed pod; podman restarts its container).
- Pod, Deployment, ConfigMap, PersistentVolumeClaim: kept (podman plays them).
- Service, NetworkPolicy, PodDisruptionBudget, ServiceAccount, Role(Binding), Namespace:
  dropped: they are API objects with no process; what they mean is checked by the offline lint.
- Downward API variables (fieldRef) and $(VAR) references in env, command and args: resolved
  to their values, as the kubelet does before it starts a container.
- Host network: every pod gets `hostNetwork: true`, and, as all pods then share one loopback,
  each declared containerPort of each pod is moved to a port of its own (from --port-base up).
  An address naming a Service, a pod's DNS name, 0.0.0.0, the pod's own port or (on
  loopback) a port only one pod declares becomes 127.0.0.1:PORT, so nothing listens beyond
  loopback and every client dials the right pod.
- Secret volumes -> read-only hostPath directories holding the Secret's keys as files (podman
  4.3 crashes on a Secret volume). emptyDir -> a hostPath folder of the pod's own, mode 0777
  (podman 4.3 makes one named volume per emptyDir name, shared by all pods); on /dev/shm
  dropped: podman mounts a tmpfs /dev/shm writable by any user.
- Probes dropped: podman 4.3 runs no gRPC probe (the manifests' are grpc.health.v1); the run
  script waits for readiness itself.

Usage: kube-to-podman.py --image IMAGE --files-dir DIR [--port-base P] [--set F=V]... < in.yaml
Writes the objects to play on stdout, a port map to --port-map and, to --client, the submit
step's container (the one running `herd job ...`) as env, files and args for `podman run`.
"""
import argparse
import base64
import copy
import json
import os
import re
import sys

import yaml

DROPPED_KINDS = {
    "Service", "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Role", "RoleBinding",
    "ClusterRole", "ClusterRoleBinding", "Namespace", "HorizontalPodAutoscaler",
}
KEPT_KINDS = {"ConfigMap", "PersistentVolumeClaim", "Pod", "Deployment"}


def fail(message):
    sys.exit(f"kube-to-podman: {message}")


def expand_statefulset(obj):
    """The Pods and claims a StatefulSet controller would create."""
    spec = obj["spec"]
    name = obj["metadata"]["name"]
    out = []
    for index in range(spec.get("replicas", 1)):
        pod_name = f"{name}-{index}"
        pod = pod_from_template(obj, spec["template"], pod_name)
        pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] = pod_name
        pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] = str(index)
        pod["spec"]["hostname"] = pod_name
        pod["spec"].setdefault("restartPolicy", "Always")  # the API server's default
        if spec.get("serviceName"):
            pod["spec"]["subdomain"] = spec["serviceName"]
        claims = []
        for template in spec.get("volumeClaimTemplates", []):
            claim_name = f"{template['metadata']['name']}-{pod_name}"
            claims.append({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim_name, "labels": dict(spec["selector"].get("matchLabels", {}))},
                "spec": copy.deepcopy(template["spec"]),
            })
            pod["spec"].setdefault("volumes", []).append(
                {"name": template["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim_name}})
        out.extend(claims)
        out.append(pod)
    return out


def expand_job(obj):
    """The Pods a Job controller would create: one per completion index."""
    spec = obj["spec"]
    name = obj["metadata"]["name"]
    indexed = spec.get("completionMode") == "Indexed"
    completions = spec.get("completions", 1)
    out = []
    for index in range(completions if indexed else 1):
        pod = pod_from_template(obj, spec["template"], f"{name}-{index}" if indexed else name)
        pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] = name
        if indexed:
            pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = str(index)
            pod["metadata"].setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = str(index)
            for container in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
                env = container.setdefault("env", [])
                if not any(v["name"] == "JOB_COMPLETION_INDEX" for v in env):
                    env.insert(0, {"name": "JOB_COMPLETION_INDEX", "value": str(index)})
        # The controller replaces a failed pod while the Job allows retries; podman's nearest
        # is to restart the failed container in place.
        retries = spec.get("backoffLimit", 6) > 0 or spec.get("backoffLimitPerIndex", 0) > 0
        if retries and pod["spec"].get("restartPolicy", "Never") == "Never":
            pod["spec"]["restartPolicy"] = "OnFailure"
        out.append(pod)
    return out


def pod_from_template(owner, template, pod_name):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": copy.deepcopy(template.get("metadata", {})),
           "spec": copy.deepcopy(template["spec"])}
    pod["metadata"]["name"] = pod_name
    pod["metadata"].setdefault("labels", {})
    if "namespace" in owner["metadata"]:
        pod["metadata"]["namespace"] = owner["metadata"]["namespace"]
    return pod


def field_value(pod, path):
    """What the Downward API gives for fieldPath in this pod (on one host, loopback)."""
    meta = pod["metadata"]
    simple = {
        "metadata.name": meta["name"], "metadata.namespace": meta.get("namespace", "default"),
        "metadata.uid": meta["name"], "spec.nodeName": "localhost",
        "spec.serviceAccountName": pod["spec"].get("serviceAccountName", "default"),
        "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1", "status.podIPs": "127.0.0.1",
    }
    if path in simple:
        return simple[path]
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        return meta.get(match.group(1), {}).get(match.group(2), "")
    fail(f"pod {meta['name']}: fieldRef {path} is not one this script resolves")


def expand_vars(text, env):
    """The kubelet's $(VAR) expansion: defined names replaced, $$ escapes, others kept."""
    def one(match):
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", one, text)


def resolve_env(pod, config_maps, secrets):
    for container in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]:
        env = {}
        for var in container.get("env", []):
            if "valueFrom" in var:
                source = var.pop("valueFrom")
                if "fieldRef" in source:
                    value = field_value(pod, source["fieldRef"]["fieldPath"])
                elif "configMapKeyRef" in source:
                    ref = source["configMapKeyRef"]
                    value = config_maps.get(ref["name"], {}).get(ref["key"], "")
                elif "secretKeyRef" in source:
                    ref = source["secretKeyRef"]
                    value = secrets.get(ref["name"], {}).get(ref["key"], b"").decode()
                elif "resourceFieldRef" in source:
                    value = "0"
                else:
                    fail(f"pod {pod['metadata']['name']}: env {var['name']}: unknown source {list(source)}")
                var["value"] = value
            var["value"] = expand_vars(str(var.get("value", "")), env)
            env[var["name"]] = var["value"]
        for key in ("command", "args"):
            if key in container:
                container[key] = [expand_vars(str(a), env) for a in container[key]]


def strings_of(container):
    """(holder, key) of every string a container passes its process: args, command, env."""
    for key in ("command", "args"):
        for i in range(len(container.get(key, []))):
            yield container[key], i
    for var in container.get("env", []):
        if "value" in var:
            yield var, "value"


def set_jobspec_fields(objects, assignments):
    """--set: fields of every JobSpec (a ConfigMap value with name, mode and workers) changed."""
    changed = 0
    for o in objects:
        if o["kind"] != "ConfigMap":
            continue
        for key, text in (o.get("data") or {}).items():
            try:
                spec = yaml.safe_load(text)
            except yaml.YAMLError:
                continue
            if not (isinstance(spec, dict) and {"name", "mode", "workers"} <= spec.keys()):
                continue
            for assignment in assignments:
                field, _, value = assignment.partition("=")
                *parents, leaf = field.split(".")
                node = spec
                for parent in parents:
                    node = node.setdefault(parent, {})
                node[leaf] = yaml.safe_load(value)
            o["data"][key] = yaml.safe_dump(spec, sort_keys=False)
            changed += 1
    if not changed:
        fail("--set: no ConfigMap holds a JobSpec")


def write_client(path, pods, config_maps, files_dir):
    """The submit step's container, to run `herd job ...` beside the pods with its settings."""
    for pod in pods:
        for container in pod["spec"]["containers"]:
            if (container.get("args") or [""])[0] != "job":
                continue
            volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
            mounts = []
            for mount in container.get("volumeMounts", []):
                volume = volumes[mount["name"]]
                if "hostPath" in volume:
                    host = volume["hostPath"]["path"]
                elif "configMap" in volume:
                    name = volume["configMap"]["name"]
                    host = os.path.abspath(os.path.join(files_dir, "configmap-" + name))
                    os.makedirs(host, exist_ok=True)
                    for key, value in config_maps[name].items():
                        with open(os.path.join(host, key), "w") as f:
                            f.write(value)
                else:
                    continue
                mounts.append([host, mount["mountPath"]])
            env = {v["name"]: v["value"] for v in container.get("env", [])}
            security = {**pod["spec"].get("securityContext", {}), **container.get("securityContext", {})}
            user = f"{security.get('runAsUser', 0)}:{security.get('runAsGroup', security.get('runAsUser', 0))}"
            with open(path, "w") as f:
                json.dump({"pod": pod["metadata"]["name"], "env": env, "mounts": mounts,
                           "args": container["args"], "user": user}, f, indent=1)
            return
    fail("no container runs `herd job ...` (the submit step): nothing to drive the job with")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", help="Replace every container's image with this one")
    parser.add_argument("--files-dir", required=True,
                        help="Where Secrets, ConfigMaps and emptyDirs become files and folders")
    parser.add_argument("--port-base", type=int, default=17000)
    parser.add_argument("--port-map", help="Write 'POD CONTAINERPORT PORT' lines here")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="Change a field of the JobSpec in the ConfigMaps (e.g. "
                        "training.epochs=3); VALUE is YAML")
    parser.add_argument("--client", help="Write, as JSON, how to run the submit step's container "
                        "by hand (env, files mounted, args): the run script's job client")
    args = parser.parse_args()

    objects = [o for o in yaml.safe_load_all(sys.stdin) if o]
    if args.set:
        set_jobspec_fields(objects, args.set)
    config_maps = {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}
    secrets = {}
    for o in objects:
        if o["kind"] == "Secret":
            data = {k: base64.b64decode(v) for k, v in (o.get("data") or {}).items()}
            data.update({k: v.encode() for k, v in (o.get("stringData") or {}).items()})
            secrets[o["metadata"]["name"]] = data
    services = [o for o in objects if o["kind"] == "Service"]

    out, pods = [], []
    for o in objects:
        kind = o["kind"]
        if kind == "StatefulSet":
            expanded = expand_statefulset(o)
        elif kind == "Job":
            expanded = expand_job(o)
        elif kind in KEPT_KINDS:
            expanded = [copy.deepcopy(o)]
        elif kind in DROPPED_KINDS or kind == "Secret":
            continue
        else:
            fail(f"{kind} {o['metadata']['name']}: no rule for this kind")
        for e in expanded:
            (pods if e["kind"] == "Pod" else out).append(e)

    # Ports: each pod's declared ports get ports of their own on the shared loopback.
    next_port = args.port_base
    ports = {}  # (pod, containerPort) -> host port
    for pod in pods:
        for container in pod["spec"]["containers"]:
            for port in container.get("ports", []):
                ports[(pod["metadata"]["name"], port["containerPort"])] = next_port
                port["containerPort"] = next_port
                port.pop("hostPort", None)
                next_port += 1

    # Service names (short and qualified) -> the one pod they select, for address rewriting.
    def selects(service, pod):
        selector = service["spec"].get("selector") or {}
        labels = pod["metadata"].get("labels", {})
        return selector and all(labels.get(k) == v for k, v in selector.items())

    # A port declared by one pod only: a loopback address with it reaches that pod (manifests
    # written for the host network address each other as 127.0.0.1:PORT).
    owners = {}
    for (pod_name, original) in ports:
        owners.setdefault(original, []).append(pod_name)
    loopback_owner = {port: names[0] for port, names in owners.items() if len(names) == 1}

    names = {}  # DNS name -> pod it reaches
    for pod in pods:
        pod_name = pod["metadata"]["name"]
        names[pod_name] = pod
        if pod["spec"].get("subdomain"):
            names[f"{pod_name}.{pod['spec']['subdomain']}"] = pod
    for service in services:
        chosen = [p for p in pods if selects(service, p)]
        if len(chosen) == 1:
            names[service["metadata"]["name"]] = chosen[0]

    def dns_pod(host):
        host = host.rstrip(".")
        for suffix in (".svc.cluster.local", ".svc"):
            if host.endswith(suffix):
                host = host[: -len(suffix)]
                host = host.rsplit(".", 1)[0] if host.count(".") >= 1 else host
        return names.get(host)

    address = re.compile(r"(\[::\]|[A-Za-z0-9][A-Za-z0-9.\-]*):(\d+)\b")

    for pod in pods:
        resolve_env(pod, config_maps, secrets)
        pod_name = pod["metadata"]["name"]
        spec = pod["spec"]
        spec["hostNetwork"] = True
        spec.pop("hostname", None)  # the host's, with the host network
        spec.pop("subdomain", None)
        spec.pop("dnsPolicy", None)
        spec.pop("hostAliases", None)

        def rewrite(match, pod_name=pod_name):
            host, port = match.group(1), int(match.group(2))
            target = dns_pod(host)
            if target is not None and (target["metadata"]["name"], port) in ports:
                return f"127.0.0.1:{ports[(target['metadata']['name'], port)]}"
            if host in ("0.0.0.0", "[::]", "127.0.0.1", "localhost"):
                if (pod_name, port) in ports:
                    return f"127.0.0.1:{ports[(pod_name, port)]}"
                if port in loopback_owner:
                    return f"127.0.0.1:{ports[(loopback_owner[port], port)]}"
            if host in ("0.0.0.0", "[::]"):
                return f"127.0.0.1:{port}"
            return match.group(0)

        shm_volumes = set()  # mounted on /dev/shm: podman's own tmpfs serves there
        for container in spec.get("initContainers", []) + spec["containers"]:
            container.pop("ports", None)  # recorded above; podman refuses them on the host network
            if args.image:
                container["image"] = args.image
            container["imagePullPolicy"] = "Never"
            for key in ("livenessProbe", "readinessProbe", "startupProbe"):
                container.pop(key, None)
            for holder, key in strings_of(container):
                holder[key] = address.sub(rewrite, holder[key])
            mounts = container.get("volumeMounts", [])
            shm_volumes.update(m["name"] for m in mounts if m["mountPath"] == "/dev/shm")
            container["volumeMounts"] = [m for m in mounts if m["mountPath"] != "/dev/shm"]

        volumes = []
        for volume in spec.get("volumes", []):
            if volume["name"] in shm_volumes:
                continue
            if "emptyDir" in volume:
                # A folder of this pod's own, mode 0777 as the kubelet makes an emptyDir (podman
                # 4.3 makes one named volume per emptyDir name, shared by every pod).
                folder = os.path.abspath(os.path.join(args.files_dir, "emptydir", pod_name, volume["name"]))
                os.makedirs(folder, exist_ok=True)
                os.chmod(folder, 0o777)
                volumes.append({"name": volume["name"], "hostPath": {"path": folder, "type": "Directory"}})
                continue
            if "secret" in volume:
                name = volume["secret"]["secretName"]
                if name not in secrets:
                    fail(f"pod {pod_name}: Secret {name} is not among the objects")
                folder = os.path.join(args.files_dir, name)
                os.makedirs(folder, exist_ok=True)
                items = volume["secret"].get("items") or [{"key": k, "path": k} for k in secrets[name]]
                for item in items:
                    with open(os.path.join(folder, item["path"]), "wb") as f:
                        f.write(secrets[name][item["key"]])
                volumes.append({"name": volume["name"],
                                "hostPath": {"path": os.path.abspath(folder), "type": "Directory"}})
                continue
            volumes.append(volume)
        spec["volumes"] = volumes
        out.append(pod)

    if args.client:
        write_client(args.client, pods, config_maps, args.files_dir)
    if args.port_map:
        with open(args.port_map, "w") as f:
            for (pod_name, original), port in sorted(ports.items(), key=lambda kv: kv[1]):
                f.write(f"{pod_name} {original} {port}\n")
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
