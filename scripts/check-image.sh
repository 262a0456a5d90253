#!/usr/bin/env bash
# Checks that herd's image runs every role, each container as the image's non-root user with a
# read-only root filesystem, on the host network (loopback only), writable paths only volumes:
#   - the image: non-root user, `herd` as entrypoint, no library missing, no compiler inside;
#   - scheduler, job client (submit, set-mode, status), server (a shard), two workers: a job that
#     trains in allreduce over UCX, then in ps_sync through the shard, and completes, every
#     process exiting 0;
#   - SIGTERM (podman stop, as Kubernetes stops a pod) ends the scheduler cleanly, as PID 1;
#   - local: `herd local` with a scheduler, a shard and two workers as its children;
#   - Python: /usr/bin/python3 imports herd.torch (no library of its module missing), and
#     `herd local -- python3 SCRIPT` trains a user's script (tests/python/train_tiny.py) on two
#     Python workers to completion.
#   scripts/check-image.sh [IMAGE]     (default localhost/herd:dev)
set -euo pipefail
cd "$(dirname "$0")/.."

image=${1:-localhost/herd:dev}
./scripts/podman-setup.sh
podman image exists "$image" || { echo "check-image: no image $image (scripts/build-image.sh)" >&2; exit 1; }

work=$(mktemp -d /tmp/herd-check-image.XXXXXX)
chmod 755 "$work"
tag=herd-check-$$
cleanup() {
  for c in $(podman ps -a --filter "label=herd-check=$tag" --format '{{.Names}}'); do
    podman rm -f -v "$c" >/dev/null 2>&1 || true
  done
  podman volume rm -f "$tag-scheduler" "$tag-shard" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-image: FAILED: $*" >&2; exit 1; }
ok() { echo "check-image: ok: $*" >&2; }

# Every container as a pod would run it: read-only root, the image's user, host network.
run() { podman run --label "herd-check=$tag" --network host --read-only --tmpfs /tmp "$@"; }

# --- The image itself -------------------------------------------------------------------------
user=$(podman image inspect --format '{{.Config.User}}' "$image")
entry=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")
[ -n "$user" ] && [ "${user%%:*}" != 0 ] && [ "${user%%:*}" != root ] || fail "image user is '$user'"
[ "$entry" = '["/usr/local/bin/herd"]' ] || fail "entrypoint is $entry"
version=$(run --rm "$image" --version)
missing=$(run --rm --entrypoint sh "$image" -c 'ldd /usr/local/bin/herd /usr/local/bin/herd-torch' |
          grep -c "not found" || true)
[ "$missing" = 0 ] || fail "$missing libraries not found by ldd"
if run --rm --entrypoint sh "$image" -c 'command -v c++ || command -v gcc || command -v cmake'; then
  fail "a compiler or cmake is in the runtime image"
fi
size=$(podman image inspect --format '{{.Size}}' "$image")
ok "image $image: user $user, entrypoint $entry, $version, no library missing, no toolchain, $((size / 1000000)) MB"

# --- scheduler, job client, server, workers ---------------------------------------------------
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/check.yaml" <<'EOF'
name: check
mode: allreduce
workers: 2
servers: 1
seed: 1
training: {model: mlp, epochs: 1, batch_size: 64, train_samples: 2000}
EOF
chmod 644 "$work/check.yaml"
podman volume create "$tag-scheduler" >/dev/null
podman volume create "$tag-shard" >/dev/null
run -d --name "$tag-scheduler" -v "$tag-scheduler:/var/lib/herd/state" "$image" \
  scheduler --listen "127.0.0.1:$port" --state /var/lib/herd/state >/dev/null
client() { run --rm -e HERD_SCHEDULER="127.0.0.1:$port" -v "$work/check.yaml:/etc/herd/check.yaml:ro" "$image" job "$@"; }
for _ in $(seq 60); do client list >/dev/null 2>&1 && break; sleep 1; done
client list >/dev/null || fail "the scheduler does not answer: $(podman logs "$tag-scheduler" 2>&1 | tail -3)"
client submit /etc/herd/check.yaml >/dev/null
client set-mode check ps_sync --from-iteration 8 >/dev/null
env=(-e HERD_SCHEDULER="127.0.0.1:$port" -e HERD_JOB=check)
run -d --name "$tag-shard" "${env[@]}" -e HERD_NAME=shard-0 -e HERD_STATE=/var/lib/herd/state \
  -v "$tag-shard:/var/lib/herd/state" "$image" server >/dev/null
for rank in 0 1; do
  run -d --name "$tag-worker-$rank" "${env[@]}" -e HERD_NAME="worker-$rank" -e HERD_RANK="$rank" \
    "$image" worker >/dev/null
done
for c in "$tag-worker-0" "$tag-worker-1" "$tag-shard"; do
  code=$(timeout 300 podman wait "$c") || fail "$c still runs after 300 s"
  [ "$code" = 0 ] || fail "$c exited $code: $(podman logs "$c" 2>&1 | tail -5)"
done
status=$(client status check)
grep -q "^state *COMPLETED" <<<"$status" || fail "job check: $status"
ok "scheduler, job client, server, 2 workers: $(grep '^result' <<<"$status" | sed 's/^result *//')"

# --- SIGTERM ends the scheduler (PID 1 in its container) without a SIGKILL -------------------
start=$(date +%s)
podman stop --time 20 "$tag-scheduler" >/dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$tag-scheduler")
took=$(( $(date +%s) - start ))
[ "$code" != 137 ] && [ "$took" -lt 20 ] || fail "the scheduler ignored SIGTERM (exit $code after $took s)"
ok "SIGTERM: the scheduler exited $code within $took s"

# --- Python: the package herd (herd.torch) for a user's own script --------------------------
where=$(run --rm --entrypoint /usr/bin/python3 "$image" -c \
          'import herd.torch, torch; print(herd.torch.__file__, "torch", torch.__version__)') ||
  fail "/usr/bin/python3 cannot import herd.torch: $where"
missing=$(run --rm --entrypoint sh "$image" -c \
            'ldd /usr/lib/python3/dist-packages/herd/_herd*.so | grep -c "not found"' || true)
[ "$missing" = 0 ] || fail "$missing libraries of herd._herd not found by ldd"
ok "python3 imports herd.torch: $where"
mkdir -m 777 "$work/py"
out=$(run --rm -v "$PWD/tests/python/train_tiny.py:/opt/train_tiny.py:ro" -v "$work/py:/out" \
        "$image" local --workers 2 --mode allreduce --json -- /usr/bin/python3 \
        /opt/train_tiny.py --out /out --iterations 10 2>&1) ||
  fail "herd local -- python3: $(tail -5 <<<"$out")"
summary=$(grep '^{"job":' <<<"$out") || fail "herd local -- python3 printed no summary: $(tail -5 <<<"$out")"
[ -s "$work/py/rank-1.json" ] || fail "the Python workers wrote no result"
ok "local -- python3 train_tiny.py: $summary"

# --- local --------------------------------------------------------------------------------------
out=$(run --rm "$image" local --workers 2 --servers 1 --mode ps_sync --model mlp --epochs 1 \
        --train-samples 2000 2>&1) || fail "herd local: $(tail -5 <<<"$out")"
grep -q "test accuracy" <<<"$out" || fail "herd local printed no accuracy: $(tail -5 <<<"$out")"
ok "local: $(grep "test accuracy" <<<"$out" | tail -1)"
echo "check-image: PASSED ($image)" >&2
