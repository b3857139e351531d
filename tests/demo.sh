#!/usr/bin/env bash
# `make demo`: the whole system on one machine, no cloud account.
#   1. starts the local Kubernetes API (fake-kube-apiserver) and the Compute emulator (gce-emulator),
#   2. starts gclb-operator against both, as the ServiceAccount deploy/rbac.yaml grants,
#   3. applies docs/examples/ (the my-ingress fanout of the GKE Ingress documentation, local Pods),
#   4. waits for the Ingress IP, sends real HTTP requests through the emulated load balancer and
#      prints which Pod answered each,
#   5. prints the load balancer that was built,
# and stops everything it started on exit or Ctrl-C. Only loopback addresses are used.
set -euo pipefail
cd "$(dirname "$0")/.."

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

# Port 80 needs root; anyone else gets the emulator's port map (80 -> an ephemeral port).
PORT_MAP=()
[[ $EUID == 0 ]] || PORT_MAP=(--port-map 80=0,443=0)

echo "== starting the Compute Engine API emulator (VPC firewall rules enforced)"
start gce-emulator "$BIN/gce-emulator" --listen 127.0.0.1:0 --access-log "$WORK/access.log" "${PORT_MAP[@]}"
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

# --takeover: the local cluster has no GKE Ingress controller, so the operator serves class gce
# and Ingresses without a class exactly as GKE does (docs/install.md), and the GKE manifests of
# docs/examples/ work unchanged.
echo "== starting gclb-operator as its ServiceAccount (deploy/rbac.yaml; a token from kubectl create token)"
kubectl apply -f deploy/namespace.yaml -f deploy/rbac.yaml | sed 's/^/   /'
cp "$KUBECONFIG" "$WORK/operator-kubeconfig"
KUBECONFIG=$WORK/operator-kubeconfig kubectl config set-credentials fake-kube-apiserver \
  --token="$(kubectl create token gclb-operator -n gclb-operator --duration 24h)" >/dev/null
POD_NAMESPACE=gclb-operator "$BIN/gclb-operator" run --takeover --project "$PROJECT" --zone "$ZONE" --network default --cluster-name demo \
  --compute-endpoint "${COMPUTE_URL%/}" --kubeconfig "$WORK/operator-kubeconfig" --metrics-listen 127.0.0.1:0 \
  --firewall-target-tags "$NODE_TAG" \
  >"$WORK/operator.log" 2>&1 &
PIDS+=($!)

echo "== kubectl apply -f docs/examples/"
kubectl apply -f docs/examples/ | sed 's/^/   /'

echo -n "== waiting for the Ingress IP "
IP=""
for _ in $(seq 1 "$DEADLINE"); do
  IP=$(kubectl get ingress my-ingress -o jsonpath='{.status.loadBalancer.ingress[0].ip}' 2>/dev/null || true)
  [[ -n $IP ]] && break
  echo -n "."; sleep 1
done
echo
[[ -n $IP ]] || { echo "demo: my-ingress got no IP" >&2; kubectl describe ingress my-ingress >&2; exit 1; }
kubectl get ingress my-ingress | sed 's/^/   /'

# The socket to send to: the IP on port 80, or the port-mapped socket the emulator reports.
SOCKET=$(curl -sf "${COMPUTE_URL}_emulator/listeners" | python3 -c '
import json, sys
ip = sys.argv[1]
data = json.load(sys.stdin)
items = data if isinstance(data, list) else data.get("listeners", [])
print(next((l["localAddr"] for l in items if l.get("ipAddress") == ip and l.get("port") == 80), ""))' "$IP")
[[ -n $SOCKET ]] || SOCKET=$IP:80

request() { # path -> prints status and the Pod that answered
  local path=$1 out status body pod
  for _ in $(seq 1 "$DEADLINE"); do
    out=$(curl -s -m 5 -w '\n%{http_code}' -H 'Host: your-store.example' "http://$SOCKET$path" || true)
    status=${out##*$'\n'}; body=${out%$'\n'*}
    # Wait until the backends are healthy (a fresh load balancer answers 502 until then).
    [[ $status == 200 || $status == 404 ]] && break
    sleep 1
  done
  pod=$(python3 -c 'import json,sys
try: print(json.loads(sys.argv[1]).get("pod", "?"))
except Exception: print(sys.argv[1][:60])' "$body")
  printf '   GET http://your-store.example%-14s -> %s  answered by %s\n' "$path" "$status" "$pod"
  [[ $status == 200 || $status == 404 ]]
}

echo "== real HTTP requests through the emulated load balancer at $IP (socket $SOCKET)"
request /products
request /products
request /discounted
request /discounted
request /no-such-page

echo "== the load balancer that was built"
curl -sf "${COMPUTE_URL}_emulator/state" >"$WORK/state.json" || true
python3 - "$COMPUTE_URL" "$PROJECT" "$ZONE" <<'PY'
import json, sys, urllib.request
base, project, zone = sys.argv[1], sys.argv[2], sys.argv[3]
def get(path, method="GET", body=None):
    req = urllib.request.Request(base + "compute/v1/projects/" + project + "/" + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)
last = lambda url: (url or "").rstrip("/").split("/")[-1]
for fr in get("global/forwardingRules").get("items", []):
    print(f"   forwardingRule {fr['name']}  {fr.get('IPAddress')}:{fr.get('portRange')}")
    proxy = last(fr.get("target"))
    kind = "targetHttpsProxies" if "targetHttpsProxies" in fr.get("target", "") else "targetHttpProxies"
    tp = get(f"global/{kind}/{proxy}")
    print(f"    -> {kind[:-7]}Proxy {proxy}")
    um = get(f"global/urlMaps/{last(tp.get('urlMap'))}")
    print(f"       -> urlMap {um['name']} (default {last(um.get('defaultService'))})")
    services = {last(um.get("defaultService"))}
    for hr in um.get("hostRules", []):
        pm = next(p for p in um.get("pathMatchers", []) if p["name"] == hr["pathMatcher"])
        for pr in pm.get("pathRules", []):
            print(f"          {','.join(hr['hosts'])} {','.join(pr['paths'])} -> {last(pr['service'])}")
            services.add(last(pr["service"]))
    for bs_name in sorted(s for s in services if s):
        bs = get(f"global/backendServices/{bs_name}")
        print(f"          -> backendService {bs_name}")
        for be in bs.get("backends", []):
            neg = last(be["group"])
            eps = get(f"zones/{zone}/networkEndpointGroups/{neg}/listNetworkEndpoints", "POST", {"healthStatus": "SHOW"})
            print(f"             -> networkEndpointGroup {neg}")
            for ep in eps.get("items", []):
                e = ep["networkEndpoint"]
                health = ",".join(h.get("healthState", "?") for h in ep.get("healths", [])) or "UNKNOWN"
                print(f"                {e.get('ipAddress')}:{e.get('port')}  {health}  (instance {e.get('instance', '?')})")
for fw in get("global/firewalls").get("items", []):
    if fw["name"].startswith("k8s-fw-"):
        allow = ",".join(f"{a['IPProtocol']}:{p}" for a in fw.get("allowed", []) for p in a.get("ports", []))
        print(f"   firewall {fw['name']}  allow {allow} from {','.join(fw.get('sourceRanges', []))} to tags {','.join(fw.get('targetTags', []))}")
for vm in get(f"zones/{zone}/instances").get("items", []):
    nic = vm["networkInterfaces"][0]
    pods = ",".join(a["ipCidrRange"] for a in nic.get("aliasIpRanges", []))
    print(f"   instance {vm['name']}  {nic.get('networkIP')}, Pod range {pods}, tags {','.join(vm.get('tags', {}).get('items', []))}")
PY
echo "== why /no-such-page got a 404: gce-emulator explain (docs/dashboard.md)"
"$BIN/gce-emulator" explain "http://your-store.example/no-such-page" --emulator "$COMPUTE_URL" --ip "$IP" | sed 's/^/   /'
echo
echo "The demo worked: requests flowed through the emulated Google Cloud load balancer."
echo "Dashboard: ${COMPUTE_URL}_emulator/dashboard"
if [[ ${DEMO_KEEP:-0} == 1 ]]; then
  echo "DEMO_KEEP=1: everything keeps running (open the dashboard); Ctrl-C stops it."
  wait
fi
