#!/usr/bin/env bash
# `make demo-gateway`: the Gateway API on the emulated Google Cloud load balancers, on one machine.
#   1. starts the Compute emulator and the local Kubernetes API (as `make demo` does),
#   2. installs the Gateway API CRDs and this operator's GatewayClass (deploy/gateway/), starts
#      gclb-operator with --gateway-api as its ServiceAccount,
#   3. applies docs/examples/gateway/demo.yaml: a Gateway (HTTP on port 80, TLS Passthrough on
#      443), an HTTPRoute splitting store.example 50/50 over two Services, two TLSRoutes sending
#      SNI alpha.example and beta.example to two TLS backends,
#   4. sends real HTTP requests through the Application Load Balancer and prints which Pod
#      answered each, then opens TLS sessions with `openssl s_client -servername` through the
#      proxy Network Load Balancer and prints the certificate each client saw (the backend's
#      own: passthrough never decrypts) and the Pod that answered inside the session,
# and stops everything it started on exit or Ctrl-C. Only loopback addresses are used.
set -euo pipefail
cd "$(dirname "$0")/.."

source tests/demo_common.sh
start_system

echo "== kubectl apply -k crds/gateway-api (Gateway API v1.5.1 standard channel)"
kubectl apply -k crds/gateway-api | sed 's/^/   /'
for _ in $(seq 1 "$DEADLINE"); do
  kubectl get gatewayclasses,gateways,httproutes,tlsroutes -A >/dev/null 2>&1 && break
  sleep 1
done
kubectl apply -f docs/examples/10-default-backend.yaml -f deploy/gateway/gatewayclass.yaml | sed 's/^/   /'
# GKE's default backend (docs/examples/10-default-backend.yaml) answers what no route matches.
start_operator deploy/namespace.yaml deploy/rbac.yaml deploy/gateway/rbac.yaml -- \
  --gateway-api --default-backend-service kube-system/default-http-backend

echo "== kubectl apply -f docs/examples/gateway/demo.yaml"
kubectl apply -f docs/examples/gateway/demo.yaml | sed 's/^/   /'

echo -n "== waiting for the Gateway to be Programmed with an address "
IP=""
for _ in $(seq 1 "$DEADLINE"); do
  programmed=$(kubectl get gateway demo -n gateway-demo -o jsonpath='{.status.conditions[?(@.type=="Programmed")].status}' 2>/dev/null || true)
  IP=$(kubectl get gateway demo -n gateway-demo -o jsonpath='{.status.addresses[0].value}' 2>/dev/null || true)
  [[ $programmed == True && -n $IP ]] && break
  IP=""
  echo -n "."; sleep 1
done
echo
[[ -n $IP ]] || { echo "demo: Gateway demo was not programmed" >&2; kubectl get gateway demo -n gateway-demo -o yaml >&2; exit 1; }
kubectl get gateway,httproute,tlsroute -n gateway-demo | sed 's/^/   /'

HTTP=$(listener_socket "$IP" 80)
TLS=$(listener_socket "$IP" 443)

pod_of() { # JSON body -> the Pod named in it
  python3 -c 'import json,sys
for line in sys.argv[1].splitlines():
    try: print(json.loads(line)["pod"]); break
    except Exception: pass
else: print("?")' "$1"
}

request() { # -> prints status and the Pod that answered
  local out status body
  for _ in $(seq 1 "$DEADLINE"); do
    out=$(curl -s -m 5 -w '\n%{http_code}' -H 'Host: store.example' "http://$HTTP/" || true)
    status=${out##*$'\n'}; body=${out%$'\n'*}
    # A fresh load balancer answers 502/503 until its backends are healthy.
    [[ $status == 200 ]] && break
    sleep 1
  done
  printf '   GET http://store.example/ -> %s  answered by %s\n' "$status" "$(pod_of "$body")"
  [[ $status == 200 ]]
}

tls_session() { # SNI -> prints the certificate the client saw and the Pod that answered
  local sni=$1 out pod san
  for _ in $(seq 1 "$DEADLINE"); do
    out=$(printf 'GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$sni" |
      timeout 10 openssl s_client -connect "$TLS" -servername "$sni" -ign_eof 2>/dev/null || true)
    pod=$(pod_of "$out")
    [[ $pod != "?" ]] && break
    sleep 1
  done
  san=$(openssl x509 -noout -ext subjectAltName 2>/dev/null <<<"$out" | tail -n +2 | tr -d ' ' || true)
  printf '   openssl s_client -servername %-13s -> certificate %s, answered by %s\n' "$sni" "${san:-none}" "$pod"
  [[ $pod != "?" ]]
}

echo "== HTTPRoute store-split: real HTTP requests through the Application Load Balancer at $IP:80 (socket $HTTP)"
for _ in 1 2 3 4 5 6; do request; done

echo "== TLSRoutes alpha and beta: TLS sessions through the proxy Network Load Balancer at $IP:443 (socket $TLS)"
tls_session alpha.example
tls_session beta.example
out=$(printf '' | timeout 10 openssl s_client -connect "$TLS" -servername unknown.example 2>&1 || true)
if grep -q 'BEGIN CERTIFICATE' <<<"$out"; then
  echo "demo: an unknown SNI got a certificate" >&2; exit 1
fi
echo "   openssl s_client -servername unknown.example -> refused (no TLSRoute claims the name)"

echo "== the Google Cloud resources the Gateway became"
python3 - "$COMPUTE_URL" "$PROJECT" <<'PY'
import json, sys, urllib.request
base, project = sys.argv[1], sys.argv[2]
def get(path):
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.load(r)
last = lambda url: (url or "").rstrip("/").split("/")[-1]
compute = f"compute/v1/projects/{project}/global/"
for fr in get(compute + "forwardingRules").get("items", []):
    print(f"   forwardingRule {fr['name']}  {fr.get('IPAddress')}:{fr.get('portRange')} -> {fr['target'].split('/global/')[-1]}")
for um in get(compute + "urlMaps").get("items", []):
    for pm in um.get("pathMatchers", []):
        for rr in pm.get("routeRules", []):
            ws = rr.get("routeAction", {}).get("weightedBackendServices", [])
            split = ", ".join(f"{last(w['backendService'])} weight {w['weight']}" for w in ws)
            if split:
                print(f"   urlMap {um['name']} routeRule priority {rr.get('priority')}: {split}")
for r in get(f"networkservices/v1/projects/{project}/locations/global/tlsRoutes").get("tlsRoutes", []):
    for rule in r.get("rules", []):
        hosts = ",".join(h for m in rule.get("matches", []) for h in m.get("sniHost", []))
        dests = ", ".join(last(d["serviceName"]) for d in rule.get("action", {}).get("destinations", []))
        print(f"   tlsRoute {last(r['name'])}: sniHost {hosts} -> {dests}")
PY
echo
echo "The Gateway demo worked: HTTP and TLS flowed through the emulated Google Cloud load balancers."
if [[ ${DEMO_KEEP:-0} == 1 ]]; then
  echo "DEMO_KEEP=1: everything keeps running; Ctrl-C stops it."
  wait
fi
