#!/usr/bin/env bash
# Runs the Kubernetes manifests for real, as containers of herd's image, on this host:
# `kubectl kustomize deploy/k8s/overlays/local`, converted for one host by
# scripts/kube-to-podman.py (what it converts and why: its header, docs/container.md), played
# with `podman kube play` on the host network, loopback only. Then:
#   1. the job trains; its accuracy is compared with `herd local` given the same JobSpec; every
#      pod's metrics port serves Prometheus text;
#   2. drills while it trains: the scheduler's container killed (SIGKILL) and started again
#      (the job goes on), a shard's killed and started again (it recovers its acknowledged
#      rounds from its volume, the job goes on), a worker's stopped with SIGTERM (a checkpoint
#      commits, the job ends PREEMPTED, the workers exit 0, the shards end), then the job resubmitted with
#      --resume and the containers started again: it resumes and completes.
# Slow (minutes), so not in the default test suite.
#   scripts/podman-run.sh [--keep]      --keep: leave the pods, volumes and files for a look
# Environment: HERD_IMAGE (default localhost/herd:dev, made by scripts/build-image.sh),
# HERD_RENDERED (a rendered YAML to play instead of the local overlay), HERD_TOLERANCE
# (largest accuracy difference accepted, default 0.02), HERD_JOB_SET (JobSpec fields changed
# before playing, FIELD=VALUE separated by spaces; default: a job long enough for the drills,
# see below; empty: the overlay's job as it is).
set -euo pipefail
cd "$(dirname "$0")/.."

image=${HERD_IMAGE:-localhost/herd:dev}
tolerance=${HERD_TOLERANCE:-0.02}
keep=0
if [ "${1:-}" = "--keep" ]; then keep=1; fi
python=/usr/bin/python3
# The drills land one after another while the job trains, each after 10 more iterations; the
# local overlay's job (50 iterations of a few milliseconds) would end before the first.
default_job_set="training.train_samples=60000 training.epochs=2"

./scripts/podman-setup.sh
if ! podman image exists "$image"; then
  echo "podman-run: no image $image: build it with scripts/build-image.sh" >&2
  exit 1
fi
work=$(mktemp -d /tmp/herd-podman.XXXXXX)
say() { echo "podman-run: $*" | tee -a "$work/report" >&2; }
die() { say "FAILED: $*"; exit 1; }

# --- Render and convert -------------------------------------------------------------------
if [ -n "${HERD_RENDERED:-}" ]; then
  cp "$HERD_RENDERED" "$work/rendered.yaml"
else
  [ -d deploy/k8s/overlays/local ] || die "deploy/k8s/overlays/local is missing"
  kubectl kustomize deploy/k8s/overlays/local > "$work/rendered.yaml"
fi
# A block of free loopback ports for the pods' declared ports (all pods share the host's).
port_base=$($python - <<'EOF'
import random, socket
for _ in range(100):
    base = random.randrange(20000, 40000, 50)
    socks = []
    try:
        for p in range(base, base + 50):
            s = socket.socket(); socks.append(s); s.bind(("127.0.0.1", p))
        print(base); break
    except OSError:
        continue
    finally:
        for s in socks: s.close()
else:
    raise SystemExit("podman-run: no block of 50 free loopback ports")
EOF
)
set_flags=()
for assignment in ${HERD_JOB_SET-$default_job_set}; do set_flags+=(--set "$assignment"); done
$python scripts/kube-to-podman.py --image "$image" --files-dir "$work/files" "${set_flags[@]}" \
  --port-base "$port_base" --port-map "$work/ports" --client "$work/client.json" \
  < "$work/rendered.yaml" > "$work/play.yaml"

# The submit step's container, by hand: the job client for status, delete and resubmission.
mapfile -d '' client_opts < <($python - "$work/client.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
out = ["--user", c["user"]]
for k, v in c["env"].items(): out += ["-e", f"{k}={v}"]
for host, ctr in c["mounts"]: out += ["-v", f"{host}:{ctr}:ro"]
sys.stdout.write("\0".join(out) + "\0")
EOF
)
mapfile -t submit_args < <($python -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["args"]))' "$work/client.json")
herd_client() { podman run --rm --network host --read-only "${client_opts[@]}" "$image" "$@"; }
# The JobSpec the submit step names (its last argument), from the files the converter wrote.
jobspec_host=$($python - "$work/client.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
path = c["args"][-1]
for host, ctr in c["mounts"]:
    if path.startswith(ctr.rstrip("/") + "/"):
        print(host + path[len(ctr.rstrip("/")):]); break
EOF
)
[ -f "$jobspec_host" ] || die "the submit step's JobSpec (${submit_args[*]}) is not in a mounted ConfigMap"
job=$($python -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["name"])' "$jobspec_host")
# Containers by role, from the pods' first argument (scheduler, server, worker).
containers_of() {
  $python - "$work/play.yaml" "$1" <<'EOF'
import sys, yaml
for o in yaml.safe_load_all(open(sys.argv[1])):
    if o and o["kind"] == "Pod":
        for c in o["spec"]["containers"]:
            if (c.get("args") or [""])[0] == sys.argv[2]:
                print(f'{o["metadata"]["name"]}-{c["name"]}')
EOF
}
volumes_of_play() {
  $python -c 'import sys,yaml; [print(o["metadata"]["name"]) for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] in ("PersistentVolumeClaim", "ConfigMap")]' "$work/play.yaml"
}

cleanup() {
  if [ "$keep" = 1 ]; then
    say "kept: pods and volumes of $work/play.yaml (podman kube down $work/play.yaml), files in $work"
    return
  fi
  podman kube down "$work/play.yaml" >/dev/null 2>&1 || true
  # The claims' volumes, and those podman 4.3 makes for ConfigMap volumes.
  for v in $(volumes_of_play); do podman volume rm -f "$v" >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- The job's status, as "STATE COMPLETED_ITERATION CHECKPOINTS_COMMITTED" -----------------
status() {
  herd_client job status "$job" --json 2>/dev/null | $python -c '
import json, sys
j = json.load(sys.stdin)
print(j["state"], j.get("completedIteration", "-1"), j.get("checkpointsCommitted", "0"))' \
    || echo "UNREACHABLE -1 0"
}
# wait_for DEADLINE_S TEST: polls the status until TEST (a shell condition on $state, $iter,
# $commits) holds; fails with the last status when the deadline passes.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )) condition=$2
  while :; do
    read -r state iter commits < <(status)
    if eval "$condition"; then return 0; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      die "waited $1 s for [$condition]; last status: $state iteration $iter, $commits checkpoints"
    fi
    sleep 2
  done
}
started_at() { podman inspect --format '{{.State.StartedAt}}' "$1"; }
# replace_pod POD: the pod removed and played again from its own object, as a controller
# replaces a failed pod: new containers, the same name, the same claims (volumes are kept).
replace_pod() {
  $python - "$work/play.yaml" "$1" > "$work/pod-$1.yaml" <<'EOF'
import sys, yaml
docs = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o]
keep = [o for o in docs if o["kind"] == "ConfigMap"
        or (o["kind"] == "Pod" and o["metadata"]["name"] == sys.argv[2])]
yaml.safe_dump_all(keep, sys.stdout, sort_keys=False)
EOF
  podman pod rm -f "$1" >/dev/null
  # Its emptyDir folders start empty again, as a new pod's would.
  if [ -d "$work/files/emptydir/$1" ]; then
    find "$work/files/emptydir/$1" -mindepth 2 -delete
  fi
  podman kube play "$work/pod-$1.yaml" >> "$work/play.log" 2>&1 || die "playing $1 again: $(tail -3 "$work/play.log")"
}
pod_of() { podman ps -a --pod --filter "name=^$1$" --format '{{.PodName}}'; }
# A shard's pod restarts it whenever it exits (restartPolicy Always, as its StatefulSet's), and
# an instance started after the job's end exits again, so its exit code at any moment says
# little: the shard's end of the job is its log's "job ... completed" line (logged when the
# job completed or was preempted, before it exits 0), since a time.
shard_ended_since() {
  local deadline=$(( $(date +%s) + 60 ))
  until podman logs --since "$2" "$1" 2>&1 | grep -q "server: job '$job' completed"; do
    [ "$(date +%s)" -lt "$deadline" ] || die "$1 logged no end of job '$job' since $2"
    sleep 1
  done
}
exit_code() { podman inspect --format '{{.State.ExitCode}}' "$1"; }
running() { [ "$(podman inspect --format '{{.State.Running}}' "$1")" = true ]; }

# --- The reference: herd local with the same JobSpec, in the image ---------------------------
mapfile -t local_flags < <($python - "$jobspec_host" <<'EOF'
import sys, yaml
s = yaml.safe_load(open(sys.argv[1]))
t, o = s.get("training", {}), s.get("optimizer", {})
flags = {"--workers": s.get("workers"), "--servers": s.get("servers"), "--mode": s.get("mode"),
         "--seed": s.get("seed"), "--model": t.get("model"), "--epochs": t.get("epochs"),
         "--batch-size": t.get("batch_size"), "--train-samples": t.get("train_samples"),
         "--optimizer": o.get("name"), "--lr": o.get("learning_rate")}
for key in ("topology", "teams", "density", "block_bytes", "staleness", "compressor"):
    flags["--" + key.replace("_", "-")] = s.get(key)
for k, v in flags.items():
    if v is not None:
        print(k); print(v)
EOF
)
say "reference: herd local ${local_flags[*]}"
podman run --rm --network host --read-only --user 10001:10001 "$image" \
  local "${local_flags[@]}" --json > "$work/reference.json" 2> "$work/reference.log" \
  || die "herd local failed: $(tail -5 "$work/reference.log")"
read -r ref_accuracy ref_digest < <($python -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["test_accuracy"], r["params_digest"])' "$work/reference.json")
say "reference: test accuracy $ref_accuracy, params digest $ref_digest"

# --- Play -------------------------------------------------------------------------------------
say "playing $(grep -c '^kind: Pod' "$work/play.yaml") pods from $work/play.yaml (ports from $port_base)"
podman kube play "$work/play.yaml" > "$work/play.log" 2>&1 || die "podman kube play: $(tail -5 "$work/play.log")"
scheduler=$(containers_of scheduler | head -1)
mapfile -t shards < <(containers_of server)
mapfile -t workers < <(containers_of worker)
[ -n "$scheduler" ] && [ ${#workers[@]} -gt 0 ] || die "the pods lack a scheduler or workers"
say "containers: scheduler $scheduler; shards ${shards[*]:-none}; workers ${workers[*]}"

# The submit step may have run before the scheduler served (it then retries, restartPolicy
# OnFailure); once the scheduler answers, submit by hand if the job is still unknown.
deadline=$(( $(date +%s) + 90 ))
until herd_client job list >/dev/null 2>&1; do
  [ "$(date +%s)" -lt "$deadline" ] || die "the scheduler did not answer within 90 s"
  sleep 2
done
sleep 5
if ! herd_client job status "$job" >/dev/null 2>&1; then
  say "the submit step has not submitted $job: submitting it by hand"
  herd_client "${submit_args[@]}" >/dev/null 2>&1 || herd_client job status "$job" >/dev/null
fi
wait_for 180 '[ "$state" = JOB_RUNNING ] && [ "$iter" -ge 10 ]'
say "job $job running, iteration $iter"

# Every pod serves Prometheus text on its declared `metrics` port (HERD_METRICS_LISTEN, moved
# to the pod's own loopback port by kube-to-podman.py), as a scraper of the annotations finds it.
while read -r pod original port; do
  [ "$original" = 9100 ] || continue
  samples=$($python -c 'import sys, urllib.request
text = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
print(sum(1 for l in text.splitlines() if l.startswith("herd_")))' "$port") ||
    die "pod $pod serves no metrics on its metrics port ($port)"
  [ "$samples" -gt 0 ] || die "pod $pod: no herd_ sample at 127.0.0.1:$port/metrics"
  say "metrics: pod $pod, 127.0.0.1:$port/metrics, $samples herd_ samples"
done < "$work/ports"

# --- Drill 1: the scheduler's container killed and started again -----------------------------
read -r _ killed_at _ < <(status)
first_start=$(started_at "$scheduler")
podman kill --signal KILL "$scheduler" >/dev/null
sleep 3
if running "$scheduler" && [ "$(started_at "$scheduler")" != "$first_start" ]; then
  how="restarted by its restart policy"
else
  podman start "$scheduler" >/dev/null
  how="started again"
fi
wait_for 60 '[ "$state" != UNREACHABLE ]'
back_at=$iter
wait_for 120 '[ "$state" = JOB_RUNNING ] && [ "$iter" -ge $((back_at + 10)) ]'
say "drill scheduler: SIGKILL after iteration $killed_at, $how on its state volume; back at iteration $back_at, the job went on: RUNNING at iteration $iter"

# --- Drill 2: a shard's container killed, its pod replaced ------------------------------------
if [ ${#shards[@]} -gt 0 ]; then
  shard=${shards[0]}
  read -r _ killed_at _ < <(status)
  podman kill --signal KILL "$shard" >/dev/null
  podman logs "$shard" > "$work/shard-before.log" 2>&1 || true
  replace_pod "$(pod_of "$shard")"
  # The new shard says what it found on its volume once the scheduler gave it its slot back.
  recovered=""
  for _ in $(seq 90); do
    recovered=$(podman logs "$shard" 2>&1 | grep -E "recovered from" | tail -1 || true)
    [ -n "$recovered" ] && break
    sleep 1
  done
  [ -n "$recovered" ] || die "the replaced shard did not say what it recovered within 90 s"
  # "N keys, M recovered": every key it had acknowledged must be back.
  read -r keys back < <(sed -E 's/.* ([0-9]+) keys, ([0-9]+) recovered.*/\1 \2/' <<<"$recovered")
  [ "$keys" = "$back" ] && [ "$keys" -gt 0 ] || die "the replaced shard recovered $back of $keys keys"
  read -r _ back_at _ < <(status)
  wait_for 120 '[ "$state" = JOB_RUNNING ] && [ "$iter" -ge $((back_at + 10)) ]'
  say "drill shard: SIGKILL to $shard after iteration $killed_at, its pod replaced on the same claim; it recovered $back of $keys keys from its volume; the job went on from iteration $back_at: RUNNING at iteration $iter"
else
  say "drill shard: skipped, the job has no shards"
fi

# --- Drill 3: a worker stopped with SIGTERM, then the job resumed ---------------------------
read -r state before commits_before < <(status)
since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
podman kill --signal TERM "${workers[-1]}" >/dev/null
wait_for 150 '[ "$state" = JOB_PREEMPTED ]'
[ "$commits" -gt "$commits_before" ] || die "PREEMPTED without a new checkpoint"
herd_client job status "$job" > "$work/preempted.txt"
for c in "${workers[@]}"; do
  for _ in $(seq 60); do running "$c" || break; sleep 1; done
  [ "$(exit_code "$c")" = 0 ] || die "$c exited $(exit_code "$c") after the preemption"
done
for c in "${shards[@]}"; do shard_ended_since "$c" "$since"; done
say "drill worker: SIGTERM to ${workers[-1]} at iteration >= $before; job PREEMPTED, $commits checkpoints committed, every worker exited 0 and every shard ended the job"
grep -E "^(preempt|checkpoint|last)" "$work/preempted.txt" | sed 's/^/  /' | tee -a "$work/report" >&2 || true

ckpt_dir=$($python -c 'import sys,yaml; print(yaml.safe_load(open(sys.argv[1]))["checkpoint"]["dir"])' "$jobspec_host")
herd_client job delete "$job" >/dev/null
since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
herd_client "${submit_args[@]}" --resume "$ckpt_dir" | tee -a "$work/report" >&2
# The SIGTERMed worker's pod is replaced (a new pod in its slot); the others start again.
replace_pod "$(pod_of "${workers[-1]}")"
for c in "${shards[@]}" "${workers[@]::${#workers[@]}-1}"; do podman start "$c" >/dev/null; done
wait_for 600 '[ "$state" = JOB_COMPLETED ] || [ "$state" = JOB_FAILED ]'
[ "$state" = JOB_COMPLETED ] || die "the resumed job ended $state: $(herd_client job status "$job" | grep -i reason)"
herd_client job status "$job" --json > "$work/final.json"
read -r accuracy digest resumed_at < <($python -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["result"]["testAccuracy"], j["result"]["paramsDigest"] or "-", j["resumed"]["iteration"])' "$work/final.json")
for c in "${workers[@]}"; do
  for _ in $(seq 60); do running "$c" || break; sleep 1; done
  [ "$(exit_code "$c")" = 0 ] || die "$c exited $(exit_code "$c") after the job completed"
done
for c in "${shards[@]}"; do shard_ended_since "$c" "$since"; done
say "resumed from iteration $resumed_at; job COMPLETED: test accuracy $accuracy, params digest $digest"

# --- Compare with herd local -----------------------------------------------------------------
$python - "$accuracy" "$ref_accuracy" "$tolerance" <<'EOF' || die "accuracy $accuracy is not within $tolerance of herd local's $ref_accuracy"
import sys
a, r, t = map(float, sys.argv[1:])
sys.exit(0 if abs(a - r) <= t else 1)
EOF
if [ "$digest" = "$ref_digest" ]; then same="the same parameters (equal digests)"; else same="other parameters (digests differ)"; fi
say "PASSED: the podman run reached test accuracy $accuracy, herd local $ref_accuracy (tolerance $tolerance), with $same"
