# Shared by `make demo` (tests/demo.sh) and `make demo-gateway` (tests/demo-gateway.sh), sourced
# after `set -euo pipefail` and `cd` to the repository: the binaries, a work directory, stopping
# everything started on exit or Ctrl-C, and starting the emulator, the local Kubernetes API and
# the operator. Only loopback addresses are used.

PROJECT=demo-project ZONE=us-central1-a NODE_TAG=gke-demo-node
DEADLINE=${DEMO_DEADLINE:-120}
TARGET_DIR=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
BIN=$TARGET_DIR/debug
for b in fake-kube-apiserver gce-emulator gclb-operator; do
  [[ -x $BIN/$b ]] || { echo "demo: $BIN/$b is missing; run 'make demo' (it builds first)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/gclb-demo.XXXXXX)
PIDS=()
cleanup() {
  local rc=$?
  echo
  echo "== stopping everything the demo started"
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ $rc != 0 ]]; then
    echo "demo failed (exit $rc); the last lines of each log:" >&2
    for f in "$WORK"/*.log; do echo "--- $f" >&2; tail -n 25 "$f" >&2; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs CMD in the background and waits for its first stdout line (its URL,
# then in $WORK/NAME.out). Not called in $(...): a subshell's PIDS would never be stopped.
start() {
  local name=$1; shift
  "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
  PIDS+=($!)
  for _ in $(seq 1 $((DEADLINE * 10))); do
    [[ -s $WORK/$name.out ]] && return 0
    kill -0 "${PIDS[-1]}" 2>/dev/null || { echo "demo: $name exited" >&2; return 1; }
    sleep 0.1
  done
  echo "demo: $name did not start" >&2; return 1
}

# start_system: the emulator ($COMPUTE_URL), then the local Kubernetes API ($KUBECONFIG).
start_system() {
  # Ports 80 and 443 need root; anyone else gets the emulator's port map (-> ephemeral ports).
  local port_map=()
  [[ $EUID == 0 ]] || port_map=(--port-map 80=0,443=0)
  echo "== starting the Compute Engine API emulator (VPC firewall rules enforced)"
  start gce-emulator "$BIN/gce-emulator" --listen 127.0.0.1:0 --access-log "$WORK/access.log" "${port_map[@]}"
  COMPUTE_URL=$(head -n1 "$WORK/gce-emulator.out")
  echo "   $COMPUTE_URL"
  echo "   dashboard: ${COMPUTE_URL}_emulator/dashboard (live topology and health; docs/dashboard.md)"

  # The local kubelet registers its Node as a Compute Engine instance (zone, Pod CIDR as an alias
  # IP range, the cluster's network tag), as a GKE node pool creates its VMs.
  echo "== starting the local Kubernetes API (its Node becomes instance local-node-1)"
  start kube-apiserver "$BIN/fake-kube-apiserver" --listen 127.0.0.1:0 --kubeconfig-out "$WORK/kubeconfig" \
    --project "$PROJECT" --compute-endpoint "${COMPUTE_URL%/}" --node-tags "$NODE_TAG"
  KUBE_URL=$(head -n1 "$WORK/kube-apiserver.out")
  export KUBECONFIG=$WORK/kubeconfig
  echo "   $KUBE_URL (kubeconfig $KUBECONFIG)"
}

# start_operator RBAC_FILE... -- FLAG...: applies the RBAC files, then runs gclb-operator as its
# ServiceAccount (a token from kubectl create token) with FLAGs.
start_operator() {
  local files=() names=()
  while [[ $1 != -- ]]; do files+=(-f "$1"); names+=("$1"); shift; done
  shift
  echo "== starting gclb-operator as its ServiceAccount (${names[*]}; a token from kubectl create token)"
  kubectl apply "${files[@]}" | sed 's/^/   /'
  cp "$KUBECONFIG" "$WORK/operator-kubeconfig"
  KUBECONFIG=$WORK/operator-kubeconfig kubectl config set-credentials fake-kube-apiserver \
    --token="$(kubectl create token gclb-operator -n gclb-operator --duration 24h)" >/dev/null
  # Application Default Credentials from the emulator's metadata server (on its API port), as
  # Workload Identity serves them on GKE.
  local md=${COMPUTE_URL#http://}
  GCE_METADATA_HOST=${md%/} POD_NAMESPACE=gclb-operator "$BIN/gclb-operator" run "$@" --project "$PROJECT" --zone "$ZONE" --network default --cluster-name demo \
    --compute-endpoint "${COMPUTE_URL%/}" --kubeconfig "$WORK/operator-kubeconfig" --metrics-listen 127.0.0.1:0 \
    --firewall-target-tags "$NODE_TAG" \
    >"$WORK/operator.log" 2>&1 &
  PIDS+=($!)
}

# listener_socket IP PORT: the socket to send to: IP:PORT, or the port-mapped socket the emulator
# reports for it.
listener_socket() {
  local socket
  socket=$(curl -sf "${COMPUTE_URL}_emulator/listeners" | python3 -c '
import json, sys
ip, port = sys.argv[1], int(sys.argv[2])
data = json.load(sys.stdin)
items = data if isinstance(data, list) else data.get("listeners", [])
print(next((l["localAddr"] for l in items if l.get("ipAddress") == ip and l.get("port") == port), ""))' "$1" "$2")
  echo "${socket:-$1:$2}"
}
