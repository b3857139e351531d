# lb.sh: sourced by the data plane benchmarks (run.sh, instructions.sh). Starts gce-emulator and
# builds the benchmark's load balancer through the REST API with curl.
#
#   lb_binary           sets EMULATOR to the release gce-emulator, building it, unless set already.
#                       Needs REPO, the repository root.
#   lb_emulator CMD...  starts `CMD --listen 127.0.0.1:0 --port-map 80=0,443=0
#                       --dataplane-threads 1` in the background (CMD: the emulator binary, maybe
#                       behind taskset or valgrind); sets EMU_PID, BASE (its URL) and API. Needs T,
#                       a scratch directory.
#   lb_build            the load balancer as a user builds it: the backend's VM (instance shop-vm,
#                       networkIP 127.0.0.1 on the default network, tag shop-backend), the
#                       firewall rule that admits Google's health checkers and proxies
#                       (130.211.0.0/22, 35.191.0.0/16) to it, NEG endpoint 127.0.0.1:BACKEND_PORT
#                       (default 18081) on that VM, backend service, URL map (host rule
#                       shop.example), target HTTP and HTTPS proxies (self-signed ECDSA P-256
#                       certificate), two global forwarding rules (shop-http, shop-https).
#                       LB_FEATURES (optional, see lb_features) turns edge features on.
#   lb_sock NAME        the forwarding rule's effective ip:port (GET /_emulator/listeners).
#
# The emulator runs with its defaults: NEG endpoints are validated against their instance and
# the VPC firewall is enforced, so without the instance or the rule the benchmark stops here
# (attachNetworkEndpoints refuses the endpoint; the proxy answers 502).
# The backend service has no health check: a benchmark may start its backend on
# 127.0.0.1:BACKEND_PORT after the load balancer exists and send traffic at once, before a probe
# could pass.
# Only 127.0.0.1 and the emulator's loopback addresses are contacted.

lb_binary() {
  [[ -n ${EMULATOR:-} ]] && return
  (cd "$REPO" && cargo build -q --release -p gce-emulator --bin gce-emulator)
  # The release binary lives in cargo's target directory, wherever CARGO_TARGET_DIR puts it.
  local target_dir
  target_dir=$(cd "$REPO" && cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
  EMULATOR=$target_dir/release/gce-emulator
}

lb_emulator() {
  # A second emulator (instructions.sh) must not find the first one's URL in the file.
  rm -f "$T/stdout" "$T/stderr"
  "$@" --listen 127.0.0.1:0 --port-map 80=0,443=0 --dataplane-threads 1 >"$T/stdout" 2>"$T/stderr" &
  EMU_PID=$!
  # Bounded wait for the first line (the API URL); under valgrind, a debug build on a busy
  # machine takes a minute or more to start.
  for _ in {1..1800}; do [[ -s $T/stdout ]] && break; sleep 0.1; done
  BASE=$(head -n1 "$T/stdout")
  [[ $BASE == http://127.0.0.1:* ]] || { cat "$T/stderr" >&2; echo "lb.sh: emulator did not start" >&2; exit 1; }
  API=${BASE%/}/compute/v1/projects/bench
  echo "lb.sh: emulator $BASE (pid $EMU_PID)" >&2
}

# lb_call METHOD PATH [JSON]: sends the request, waits for the returned operation, fails on error.
lb_call() {
  local out link
  out=$(curl -sS --max-time 30 -X "$1" -H 'content-type: application/json' ${3:+--data "$3"} "$API/$2")
  if [[ $out == *'"error"'* ]]; then echo "lb.sh: $1 $2 failed: $out" >&2; exit 1; fi
  link=$(sed -n 's/.*"selfLink": *"\([^"]*\/operations\/[^"]*\)".*/\1/p' <<<"$out" | head -n1)
  if [[ -n $link ]]; then
    curl -sS --max-time 30 -X POST "${API}/${link#*/projects/bench/}/wait" >/dev/null
  fi
}

lb_build() {
  local z=zones/us-central1-a cert key port=${BACKEND_PORT:-18081}
  # The VM the endpoint lives on (as the local kubelet registers a Node's: its networkIP holds
  # the endpoint's address) and the rule that lets Google's health checkers and proxies reach it.
  lb_call POST $z/instances "{\"name\":\"shop-vm\",\"machineType\":\"$z/machineTypes/e2-small\",\"tags\":{\"items\":[\"shop-backend\"]},\"disks\":[{\"boot\":true,\"initializeParams\":{}}],\"networkInterfaces\":[{\"network\":\"global/networks/default\",\"networkIP\":\"127.0.0.1\"}]}"
  lb_call POST global/firewalls "{\"name\":\"shop-allow-lb\",\"network\":\"global/networks/default\",\"direction\":\"INGRESS\",\"sourceRanges\":[\"130.211.0.0/22\",\"35.191.0.0/16\"],\"targetTags\":[\"shop-backend\"],\"allowed\":[{\"IPProtocol\":\"tcp\",\"ports\":[\"$port\"]}]}"
  lb_call POST $z/networkEndpointGroups "{\"name\":\"shop-neg\",\"networkEndpointType\":\"GCE_VM_IP_PORT\",\"defaultPort\":$port,\"network\":\"global/networks/default\"}"
  lb_call POST $z/networkEndpointGroups/shop-neg/attachNetworkEndpoints "{\"networkEndpoints\":[{\"instance\":\"shop-vm\",\"ipAddress\":\"127.0.0.1\",\"port\":$port}]}"
  lb_call POST global/backendServices "{\"name\":\"shop\",\"protocol\":\"HTTP\",\"loadBalancingScheme\":\"EXTERNAL\",\"timeoutSec\":30,\"backends\":[{\"group\":\"$API/$z/networkEndpointGroups/shop-neg\",\"balancingMode\":\"RATE\",\"maxRatePerEndpoint\":100000}]}"
  local hosts='{"hosts":["shop.example"],"pathMatcher":"shop"}'
  local matchers="{\"name\":\"shop\",\"defaultService\":\"$API/global/backendServices/shop\"}"
  if [[ ${LB_FEATURES:-0} == 1 ]]; then
    lb_features
    local f
    for f in "${LB_FEATURE_NAMES[@]}"; do
      hosts+=",{\"hosts\":[\"$f.example\"],\"pathMatcher\":\"$f\"}"
      matchers+=",{\"name\":\"$f\",\"defaultService\":\"$API/global/backendServices/shop-$f\"}"
    done
  fi
  lb_call POST global/urlMaps "{\"name\":\"shop\",\"defaultService\":\"$API/global/backendServices/shop\",\"hostRules\":[$hosts],\"pathMatchers\":[$matchers]}"
  lb_call POST global/targetHttpProxies "{\"name\":\"shop\",\"urlMap\":\"$API/global/urlMaps/shop\"}"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=shop.example \
    -keyout "$T/key.pem" -out "$T/cert.pem" 2>/dev/null
  cert=$(sed ':a;N;$!ba;s/\n/\\n/g' "$T/cert.pem") key=$(sed ':a;N;$!ba;s/\n/\\n/g' "$T/key.pem")
  lb_call POST global/sslCertificates "{\"name\":\"shop\",\"type\":\"SELF_MANAGED\",\"certificate\":\"$cert\",\"privateKey\":\"$key\"}"
  lb_call POST global/targetHttpsProxies "{\"name\":\"shop\",\"urlMap\":\"$API/global/urlMaps/shop\",\"sslCertificates\":[\"$API/global/sslCertificates/shop\"]}"
  lb_call POST global/forwardingRules "{\"name\":\"shop-http\",\"IPProtocol\":\"TCP\",\"portRange\":\"80\",\"loadBalancingScheme\":\"EXTERNAL\",\"target\":\"$API/global/targetHttpProxies/shop\"}"
  lb_call POST global/forwardingRules "{\"name\":\"shop-https\",\"IPProtocol\":\"TCP\",\"portRange\":\"443\",\"loadBalancingScheme\":\"EXTERNAL\",\"target\":\"$API/global/targetHttpsProxies/shop\"}"
}

# The features of the per-feature cost table (instructions.sh FEATURES=1), one backend service
# each on the same NEG, routed by host FEATURE.example:
#   armor     a Cloud Armor policy of three CEL rules (header, origin.ip, path) that all miss
#   waf       a Cloud Armor policy running the OWASP CRS (sqli-v33-stable, sensitivity 1)
#   cdn-hit   Cloud CDN, FORCE_CACHE_ALL: every request after the first is a hit
#   cdn-miss  Cloud CDN, USE_ORIGIN_HEADERS: the backend sends no freshness, so every request is
#             looked up, missed, forwarded and not stored
#   iap       IAP; requests carry the session cookie of an allowed user (lb_iap_cookie)
#   log       logConfig with sampleRate 1: every request becomes a Cloud Logging entry
LB_FEATURE_NAMES=(armor waf cdn-hit cdn-miss iap log)
lb_features() {
  local z=zones/us-central1-a neg allow
  neg="\"backends\":[{\"group\":\"$API/$z/networkEndpointGroups/shop-neg\",\"balancingMode\":\"RATE\",\"maxRatePerEndpoint\":100000}]"
  allow='{"priority":2147483647,"action":"allow","match":{"versionedExpr":"SRC_IPS_V1","config":{"srcIpRanges":["*"]}}}'
  lb_call POST global/securityPolicies "{\"name\":\"bench-cel\",\"rules\":[
    {\"priority\":1000,\"action\":\"deny(403)\",\"match\":{\"expr\":{\"expression\":\"request.headers['x-block'] == 'yes'\"}}},
    {\"priority\":1001,\"action\":\"deny(403)\",\"match\":{\"expr\":{\"expression\":\"origin.ip == '198.51.100.7'\"}}},
    {\"priority\":1002,\"action\":\"deny(404)\",\"match\":{\"expr\":{\"expression\":\"request.path.startsWith('/admin')\"}}},
    $allow]}"
  lb_call POST global/securityPolicies "{\"name\":\"bench-waf\",\"rules\":[
    {\"priority\":1000,\"action\":\"deny(403)\",\"match\":{\"expr\":{\"expression\":\"evaluatePreconfiguredWaf('sqli-v33-stable', {'sensitivity': 1})\"}}},
    $allow]}"
  local svc='"protocol":"HTTP","loadBalancingScheme":"EXTERNAL","timeoutSec":30'
  lb_call POST global/backendServices "{\"name\":\"shop-armor\",$svc,$neg,\"securityPolicy\":\"$API/global/securityPolicies/bench-cel\"}"
  lb_call POST global/backendServices "{\"name\":\"shop-waf\",$svc,$neg,\"securityPolicy\":\"$API/global/securityPolicies/bench-waf\"}"
  lb_call POST global/backendServices "{\"name\":\"shop-cdn-hit\",$svc,$neg,\"enableCDN\":true,\"cdnPolicy\":{\"cacheMode\":\"FORCE_CACHE_ALL\",\"defaultTtl\":3600}}"
  lb_call POST global/backendServices "{\"name\":\"shop-cdn-miss\",$svc,$neg,\"enableCDN\":true,\"cdnPolicy\":{\"cacheMode\":\"USE_ORIGIN_HEADERS\"}}"
  lb_call POST global/backendServices "{\"name\":\"shop-iap\",$svc,$neg,\"iap\":{\"enabled\":true}}"
  lb_call POST global/backendServices "{\"name\":\"shop-log\",$svc,$neg,\"logConfig\":{\"enable\":true,\"sampleRate\":1.0}}"
  curl -sS --max-time 30 -X PUT "${BASE%/}/_emulator/iap/accessors" \
    --data '{"bindings":[{"member":"user:bench@example.com"}]}' >/dev/null
}

# lb_iap_cookie ADDR: the `Cookie` header value of an IAP session of bench@example.com, signed in
# through the load balancer's sign-in page at ADDR (ip:port of the HTTP forwarding rule).
lb_iap_cookie() {
  local c
  c=$(curl -sS --max-time 30 -o /dev/null -D - -H 'Host: iap.example' \
    "http://$1/_gcp_iap/authenticate?email=bench@example.com&continue=/" |
    sed -n 's/^[Ss]et-[Cc]ookie: *\([^;]*\).*/\1/p' | head -n1)
  [[ -n $c ]] || { echo "lb.sh: IAP sign-in gave no session cookie" >&2; exit 1; }
  echo "$c"
}

lb_sock() {
  local s=""
  for _ in {1..100}; do
    s=$(curl -sS --max-time 5 "${BASE%/}/_emulator/listeners" | tr '{' '\n' | grep "forwardingRules/$1\"" |
      sed -n 's/.*"localAddr": *"\([^"]*\)".*/\1/p' | head -n1)
    [[ -n $s ]] && break
    sleep 0.1
  done
  [[ -n $s ]] || { echo "lb.sh: no listener for $1" >&2; exit 1; }
  echo "$s"
}
