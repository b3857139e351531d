# lb.sh: sourced by the data plane benchmarks (run.sh, instructions.sh). Starts gce-emulator and
# builds the benchmark's load balancer through the REST API with curl.
#
#   lb_binary           sets EMULATOR to the release gce-emulator, building it, unless set already.
#                       Needs REPO, the repository root.
#   lb_emulator CMD...  starts `CMD --listen 127.0.0.1:0 --port-map 80=0,443=0
#                       --dataplane-threads 1` in the background (CMD: the emulator binary, maybe
#                       behind taskset or valgrind); sets EMU_PID, BASE (its URL) and API. Needs T,
#                       a scratch directory.
#   lb_build            NEG endpoint 127.0.0.1:18081, backend service, URL map (host rule
#                       shop.example), target HTTP and HTTPS proxies (self-signed ECDSA P-256
#                       certificate), two global forwarding rules (shop-http, shop-https).
#   lb_sock NAME        the forwarding rule's effective ip:port (GET /_emulator/listeners).
#
# The backend service has no health check: a benchmark may start its backend on 127.0.0.1:18081
# after the load balancer exists and send traffic at once, before a probe could pass.
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
  "$@" --listen 127.0.0.1:0 --port-map 80=0,443=0 --dataplane-threads 1 >"$T/stdout" 2>"$T/stderr" &
  EMU_PID=$!
  # Bounded wait for the first line (the API URL); under valgrind start-up takes seconds.
  for _ in {1..300}; do [[ -s $T/stdout ]] && break; sleep 0.1; done
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
  local z=zones/us-central1-a cert key
  lb_call POST $z/networkEndpointGroups '{"name":"shop-neg","networkEndpointType":"GCE_VM_IP_PORT","defaultPort":18081,"network":"global/networks/default"}'
  lb_call POST $z/networkEndpointGroups/shop-neg/attachNetworkEndpoints '{"networkEndpoints":[{"ipAddress":"127.0.0.1","port":18081}]}'
  lb_call POST global/backendServices "{\"name\":\"shop\",\"protocol\":\"HTTP\",\"loadBalancingScheme\":\"EXTERNAL\",\"timeoutSec\":30,\"backends\":[{\"group\":\"$API/$z/networkEndpointGroups/shop-neg\",\"balancingMode\":\"RATE\",\"maxRatePerEndpoint\":100000}]}"
  lb_call POST global/urlMaps "{\"name\":\"shop\",\"defaultService\":\"$API/global/backendServices/shop\",\"hostRules\":[{\"hosts\":[\"shop.example\"],\"pathMatcher\":\"shop\"}],\"pathMatchers\":[{\"name\":\"shop\",\"defaultService\":\"$API/global/backendServices/shop\"}]}"
  lb_call POST global/targetHttpProxies "{\"name\":\"shop\",\"urlMap\":\"$API/global/urlMaps/shop\"}"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=shop.example \
    -keyout "$T/key.pem" -out "$T/cert.pem" 2>/dev/null
  cert=$(sed ':a;N;$!ba;s/\n/\\n/g' "$T/cert.pem") key=$(sed ':a;N;$!ba;s/\n/\\n/g' "$T/key.pem")
  lb_call POST global/sslCertificates "{\"name\":\"shop\",\"type\":\"SELF_MANAGED\",\"certificate\":\"$cert\",\"privateKey\":\"$key\"}"
  lb_call POST global/targetHttpsProxies "{\"name\":\"shop\",\"urlMap\":\"$API/global/urlMaps/shop\",\"sslCertificates\":[\"$API/global/sslCertificates/shop\"]}"
  lb_call POST global/forwardingRules "{\"name\":\"shop-http\",\"IPProtocol\":\"TCP\",\"portRange\":\"80\",\"loadBalancingScheme\":\"EXTERNAL\",\"target\":\"$API/global/targetHttpProxies/shop\"}"
  lb_call POST global/forwardingRules "{\"name\":\"shop-https\",\"IPProtocol\":\"TCP\",\"portRange\":\"443\",\"loadBalancingScheme\":\"EXTERNAL\",\"target\":\"$API/global/targetHttpsProxies/shop\"}"
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
