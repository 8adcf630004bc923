#!/usr/bin/env bash
# The e2e suite against Overseer deployed in a kind cluster (DESIGN.md §5, issue 8).
#
#   bash e2e/kind.sh [PYTEST ARGS...]      (or: make e2e-kind)
#
# 1. creates a kind cluster of 3 nodes (a control plane and two workers);
# 2. builds the image (docker build -t overseer:dev .) and loads it into the nodes;
# 3. applies deploy/ (kubectl apply -k) and waits for the CRD and the rollout, and for a
#    replica to take the Lease;
# 4. runs the e2e suite against the cluster: OVERSEER_TEST_KUBECONFIG points at it and
#    OVERSEER_E2E_TARGET=kind tells the tests that Overseer runs as pods (the leader is
#    the pod whose name prefixes the Lease's holderIdentity; kill -9 = force delete with
#    grace 0, graceful = plain delete; see e2e/cluster.py);
# 5. on failure, collects logs and descriptions into e2e/out/;
# 6. deletes the cluster on exit, however it exits (OVERSEER_KIND_KEEP=1 keeps it).
#
# Without docker (or a running engine) or kind it prints "skipped: ..." and exits 0.
#
# Environment: OVERSEER_KIND_CLUSTER (default overseer-e2e), OVERSEER_KIND_IMAGE (kind
# node image, default: kind's own), OVERSEER_KIND_KEEP, PYTHON (default .venv/bin/python,
# made with `make venv`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CLUSTER="${OVERSEER_KIND_CLUSTER:-overseer-e2e}"
IMAGE="overseer:dev"
NAMESPACE="overseer-system"
LEASE="overseer-leader"
OUT="$ROOT/e2e/out"
KUBECONFIG_FILE="$OUT/kubeconfig-$CLUSTER"
KEEP="${OVERSEER_KIND_KEEP:-0}"

log() { printf '==> %s\n' "$*"; }

skip() {
    printf 'e2e/kind.sh: skipped: docker/kind not available (%s)\n' "$1"
    exit 0
}

command -v docker >/dev/null 2>&1 || skip "docker is not installed"
docker info >/dev/null 2>&1 || skip "'docker info' failed: no running docker engine"
command -v kind >/dev/null 2>&1 || skip "kind is not installed"
if ! command -v kubectl >/dev/null 2>&1; then
    echo "e2e/kind.sh: kubectl (with kustomize, >= 1.27) is required" >&2
    exit 1
fi

mkdir -p "$OUT"
kc() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }

collect() {
    local dir="$OUT/kind-$(date +%Y%m%d-%H%M%S)"
    mkdir -p "$dir"
    log "collecting logs into ${dir#"$ROOT"/}"
    kc -n "$NAMESPACE" logs -l app.kubernetes.io/name=overseer --all-containers --prefix \
        --tail=-1 >"$dir/overseer.log" 2>&1 || true
    kc -n "$NAMESPACE" logs -l app.kubernetes.io/name=overseer --all-containers --prefix \
        --tail=-1 --previous >"$dir/overseer-previous.log" 2>&1 || true
    kc -n "$NAMESPACE" describe deployment,replicasets,pods,pdb,lease >"$dir/describe.txt" 2>&1 || true
    kc get nodes -o wide >"$dir/nodes.txt" 2>&1 || true
    kc get all,leases,ingresses -A -o wide >"$dir/resources.txt" 2>&1 || true
    kc get logicalports -o wide >"$dir/logicalports.txt" 2>&1 || true
    kc get events -A --sort-by=.lastTimestamp >"$dir/events.txt" 2>&1 || true
    kind export logs "$dir/kind" --name "$CLUSTER" >/dev/null 2>&1 || true
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ "$rc" -ne 0 ] && [ -f "$KUBECONFIG_FILE" ]; then
        collect
    fi
    if [ "$KEEP" = "1" ]; then
        log "keeping cluster $CLUSTER (kubeconfig: $KUBECONFIG_FILE)"
    else
        log "deleting cluster $CLUSTER"
        kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
        rm -f "$KUBECONFIG_FILE"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
    log "deleting the cluster $CLUSTER left by an earlier run"
    kind delete cluster --name "$CLUSTER"
fi

log "creating kind cluster $CLUSTER (3 nodes)"
node_image=()
if [ -n "${OVERSEER_KIND_IMAGE:-}" ]; then
    node_image=(--image "$OVERSEER_KIND_IMAGE")
fi
kind create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG_FILE" --wait 180s \
    "${node_image[@]}" --config - <<'KIND'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
  - role: worker
KIND

log "building $IMAGE"
docker build -t "$IMAGE" .
log "loading $IMAGE into the nodes"
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "applying deploy/"
kc apply -k deploy/
kc wait --for condition=established --timeout=60s crd/logicalports.network.overseer.io
log "waiting for the rollout"
kc -n "$NAMESPACE" rollout status deployment/overseer --timeout=300s

# metrics are secure (HTTPS, TokenReview + SubjectAccessReview): the suite reads them as
# a ServiceAccount bound to overseer-metrics-reader, as Prometheus would
log "granting e2e-metrics-reader the ClusterRole overseer-metrics-reader"
kc -n "$NAMESPACE" create serviceaccount e2e-metrics-reader --dry-run=client -o yaml | kc apply -f -
kc create clusterrolebinding e2e-metrics-reader --clusterrole=overseer-metrics-reader \
    --serviceaccount="$NAMESPACE:e2e-metrics-reader" --dry-run=client -o yaml | kc apply -f -

log "waiting for a leader"
holder=""
for _ in $(seq 1 60); do
    holder="$(kc -n "$NAMESPACE" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' \
        2>/dev/null || true)"
    [ -n "$holder" ] && break
    sleep 1
done
if [ -z "$holder" ]; then
    echo "e2e/kind.sh: no replica took the Lease $NAMESPACE/$LEASE within 60 s" >&2
    exit 1
fi
log "leader: $holder"
kc -n "$NAMESPACE" get pods -o wide

PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
    make venv
    PYTHON="$ROOT/.venv/bin/python"
fi

log "running the e2e suite against the cluster"
OVERSEER_TEST_KUBECONFIG="$KUBECONFIG_FILE" \
OVERSEER_E2E_TARGET=kind \
OVERSEER_E2E_NAMESPACE="$NAMESPACE" \
OVERSEER_E2E_LEASE="$LEASE" \
    "$PYTHON" -m pytest e2e -ra -p no:cacheprovider \
        --junitxml "$OUT/junit-kind.xml" "$@"
log "e2e on kind: passed"
