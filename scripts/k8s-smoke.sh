#!/usr/bin/env bash
# A smoke test of herd's manifests on a real Kubernetes cluster (docs/kubernetes.md).
#
# NOT RUN where it was written: no cluster can run on that machine. The manifests themselves
# are tested offline there (ctest -L deploy); this script is what a cluster adds: pods
# scheduled, probes passing, the pod network, volumes, the Job controller. Read it before you
# run it; it creates and (unless --keep) deletes one namespace.
#
#   scripts/k8s-smoke.sh [--overlay cpu|gpu|ps] [--namespace NS] [--image REF]
#                        [--timeout SECONDS] [--kill-shard] [--keep]
#
# It makes the Secrets (a random token; for the TLS overlays a throwaway CA and a certificate
# naming herd-scheduler and *.herd-shards), applies the overlay with the image, waits for the
# workers' Job to complete, checks that the herd job is COMPLETED and prints its result.
# --kill-shard (ps overlay) deletes pod herd-shard-0 once training runs: the job must still
# complete.
set -euo pipefail

overlay=ps namespace=herd-smoke image="" timeout=3600 kill_shard=0 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --overlay) overlay=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --image) image=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --kill-shard) kill_shard=1; shift ;;
    --keep) keep=1; shift ;;
    *) echo "k8s-smoke: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$overlay" in cpu|gpu|ps) ;; *) echo "k8s-smoke: --overlay cpu, gpu or ps" >&2; exit 2 ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
k() { kubectl -n "$namespace" "$@"; }
cleanup() {
  rm -rf "$work"
  if [ "$keep" = 0 ]; then kubectl delete namespace "$namespace" --wait=false >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
step() { echo "k8s-smoke: $*" >&2; }

kubectl cluster-info >/dev/null || { echo "k8s-smoke: no cluster (kubectl cluster-info failed)" >&2; exit 1; }
kubectl create namespace "$namespace"

step "secrets"
k create secret generic herd-token --from-literal=token="$(openssl rand -hex 32)"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=herd-smoke-ca" \
  -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=herd-scheduler" \
  -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:herd-scheduler,DNS:herd-scheduler.%s.svc,DNS:*.herd-shards,DNS:*.herd-shards.%s.svc\n' \
  "$namespace" "$namespace" > "$work/san.ext"
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
  -days 2 -extfile "$work/san.ext" -out "$work/tls.crt" 2>/dev/null
k create secret generic herd-tls --from-file="$work/tls.crt" --from-file="$work/tls.key" \
  --from-file="$work/ca.crt"

step "apply overlays/$overlay"
cat > "$work/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: $namespace
resources:
  - $(realpath --relative-to="$work" "$root/deploy/k8s/overlays/$overlay")
YAML
if [ -n "$image" ]; then
  printf 'images:\n  - name: registry.example.com/herd\n    newName: %s\n' "${image%:*}" >> "$work/kustomization.yaml"
  [ "${image##*:}" != "$image" ] && printf '    newTag: "%s"\n' "${image##*:}" >> "$work/kustomization.yaml"
fi
kubectl kustomize "$work" > "$work/rendered.yaml"
k apply -f "$work/rendered.yaml"

status() {
  k exec herd-scheduler-0 -- herd job status fmnist --scheduler herd-scheduler:7070 \
    --tls-ca /var/run/secrets/herd/tls/ca.crt
}

step "waiting for the scheduler"
k rollout status statefulset/herd-scheduler --timeout=600s
if [ "$kill_shard" = 1 ]; then
  step "waiting for training, then deleting herd-shard-0"
  deadline=$((SECONDS + 900))
  until status 2>/dev/null | grep -q "^state *RUNNING"; do
    [ $SECONDS -lt $deadline ] || { echo "k8s-smoke: the job never ran" >&2; exit 1; }
    sleep 5
  done
  sleep 30
  k delete pod herd-shard-0 --wait=false
fi

step "waiting up to ${timeout} s for job/herd-workers to complete"
if ! k wait --for=condition=complete job/herd-workers --timeout="${timeout}s"; then
  k get pods -o wide >&2
  status >&2 || true
  echo "k8s-smoke: FAILED: the workers' Job did not complete" >&2
  exit 1
fi
out=$(status)
echo "$out"
grep -q "^state *COMPLETED" <<<"$out" || { echo "k8s-smoke: FAILED: job not COMPLETED" >&2; exit 1; }
step "OK: the job completed on the cluster"
