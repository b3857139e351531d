#!/usr/bin/env bash
# `make demo`: the whole system on one machine, no cloud account.
#   1. starts the local Kubernetes API (fake-kube-apiserver) and the Compute emulator (gce-emulator),
#   2. starts gclb-operator against both, as the ServiceAccount deploy/rbac.yaml grants,
#   3. applies docs/examples/ (the my-ingress fanout of the GKE Ingress documentation over two
#      Deployments) and docs/examples/tutorial/ (GKE's Ingress tutorial as published: hello-app
#      Deployments web and web2, fanout-ingress), and waits for `kubectl rollout status`,
#   4. waits for the Ingress IPs, sends real HTTP requests through the emulated load balancers and
#      prints which replica answered each,
#   5. prints the load balancer that was built,
# and stops everything it started on exit or Ctrl-C. Only loopback addresses are used.
set -euo pipefail
cd "$(dirname "$0")/.."

source tests/demo_common.sh
start_system

# --takeover: the local cluster has no GKE Ingress controller, so the operator serves class gce
# and Ingresses without a class exactly as GKE does (docs/install.md), and the GKE manifests of
# docs/examples/ work unchanged.
start_operator deploy/namespace.yaml deploy/rbac.yaml -- --takeover

echo "== kubectl apply -f docs/examples/ -f docs/examples/tutorial/"
kubectl apply -f docs/examples/ -f docs/examples/tutorial/ | sed 's/^/   /'
echo "== kubectl rollout status (the local Deployment controller and kubelet run every replica)"
for d in deployment/products deployment/discounted-products deployment/web deployment/web2; do
  kubectl rollout status "$d" --timeout="${DEADLINE}s" | sed 's/^/   /'
done
kubectl get deploy,rs,pods -o wide | sed 's/^/   /'

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

SOCKET=$(listener_socket "$IP" 80)

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

echo "== GKE's Ingress tutorial: fanout-ingress (/* to web, hello-app 1.0; /v2/* to web2, 2.0)"
FANOUT_IP=""
for _ in $(seq 1 "$DEADLINE"); do
  FANOUT_IP=$(kubectl get ingress fanout-ingress -o jsonpath='{.status.loadBalancer.ingress[0].ip}' 2>/dev/null || true)
  [[ -n $FANOUT_IP ]] && break
  sleep 1
done
[[ -n $FANOUT_IP ]] || { echo "demo: fanout-ingress got no IP" >&2; kubectl describe ingress fanout-ingress >&2; exit 1; }
FANOUT_SOCKET=$(listener_socket "$FANOUT_IP" 80)
hello() { # path -> prints hello-app's Version and Hostname lines
  local path=$1 out status body
  for _ in $(seq 1 "$DEADLINE"); do
    out=$(curl -s -m 5 -w '\n%{http_code}' "http://$FANOUT_SOCKET$path" || true)
    status=${out##*$'\n'}; body=${out%$'\n'*}
    [[ $status == 200 && $body == *Hostname:* ]] && break
    sleep 1
  done
  printf '   GET http://%s%-10s -> %s  %s, answered by %s\n' "$FANOUT_IP" "$path" "$status" \
    "$(grep -o 'Version: [0-9.]*' <<<"$body")" "$(sed -n 's/^Hostname: //p' <<<"$body")"
  [[ $status == 200 ]]
}
hello /
hello /
hello /v2/
hello /v2/

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
