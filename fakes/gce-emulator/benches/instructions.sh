#!/usr/bin/env bash
# Instructions per proxied request (`make bench-instructions`): the data plane's CPU cost counted
# by valgrind's callgrind. Unlike the wall-clock figures of run.sh it does not move with other
# load on a shared machine, so a change of a few percent on the request path shows. It counts
# user-space instructions only: the kernel's share (loopback TCP, about 60 % of the proxy's CPU
# time, the same as nginx's) is not in it.
#
# 1. builds gce-emulator (release) unless EMULATOR is set and starts it under callgrind with
#    instrumentation off and the emulator's defaults (NEG endpoints validated, firewall
#    enforced); a backend answers on 127.0.0.1, an ephemeral port (load.sh: nginx if installed,
#    else loadgen.py; a 100-byte body, as in ../shared/bench/proxy-compare.sh);
# 2. builds run.sh's load balancer (lb.sh) and, with FEATURES=1 (default), one backend service
#    per edge feature (lb.sh lb_features: Cloud Armor CEL rules, the CRS WAF, CDN hit, CDN
#    miss, IAP with a session, request logging at sample rate 1); starts the nginx peer of
#    proxy-compare.sh (same configuration, one process) under callgrind on two ports the kernel picks (HTTP and
#    TLS) when nginx is installed and PEER is not 0;
# 3. per row, after a warm-up: counts instructions over a load run of SECS and one of 2 x SECS
#    seconds (CONNS keep-alive connections each, default 16; wrk, else loadgen.py);
#    instructions per request = the difference of the counts over the difference of the
#    requests, which cancels what a run costs once (new connections, TLS handshakes). With
#    FEATURES=1 a last row runs a second emulator with `--enforce-firewall=false`, the one
#    place a benchmark turns enforcement off: it prices enforcement, it does not build a load
#    balancer with it off;
# 4. prints each row beside its recorded figure (benches/instructions-recorded.tsv, release
#    builds of this machine) and flags an increase over 10 %; it never fails on a figure.
#    RECORD=1 writes the measured figures to that file.
#
# Environment: EMULATOR (prebuilt binary, skips the build), SECS (default 5), CONNS (default 16),
# FEATURES (default 1; 0 measures the plain rows only), INSTALL=1 (apt-get install valgrind
# nginx wrk first), PEER=0 (skip nginx), KEEP=DIR (copy the callgrind dump of each run there,
# e.g. DIR/emulator-https-keep-alive-10s.cg, for `callgrind_annotate`), RECORD=1.
# Only 127.0.0.1 and the emulator's loopback addresses are contacted; every run is bounded in
# time.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
SECS=${SECS:-5}
FEATURES=${FEATURES:-1}
RECORDED=$HERE/instructions-recorded.tsv
if [[ ${INSTALL:-0} == 1 ]]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind nginx wrk >&2
fi
for c in valgrind callgrind_control curl openssl python3; do
  command -v $c >/dev/null || { echo "instructions.sh: $c missing (INSTALL=1 installs it)" >&2; exit 2; }
done
PEER=${PEER:-1}
if [[ $PEER == 1 ]] && ! command -v nginx >/dev/null; then
  echo "instructions.sh: nginx is not installed: no nginx rows (INSTALL=1 installs it)" >&2
  PEER=0
fi
# shellcheck source=lb.sh
source "$HERE/lb.sh"
# shellcheck source=load.sh
source "$HERE/load.sh"
lb_binary

T=$(mktemp -d /tmp/dataplane-instructions.XXXXXX)
EMU_PID="" BE_PID="" NG_PID=""
cleanup() {
  for p in $EMU_PID $NG_PID $BE_PID; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

# ngx_head NAME [DIRECTIVES]: the start of an nginx configuration whose pid, logs and temporary
# files live under $T/NAME, ending inside its `http` block; DIRECTIVES go in the main context.
ngx_head() {
  mkdir -p "$T/$1"
  cat <<EOF
daemon off; ${2:-}worker_processes 1; pid $T/$1/nginx.pid; error_log $T/$1/error.log warn;
events { worker_connections 1024; }
http {
  access_log off; default_type text/plain; keepalive_requests 1000000;
  client_body_temp_path $T/$1/cb; proxy_temp_path $T/$1/px; fastcgi_temp_path $T/$1/fc;
  uwsgi_temp_path $T/$1/uw; scgi_temp_path $T/$1/sc;
EOF
}
load_backend

# start_emulator [ARGS...]: the emulator under callgrind, its load balancer built, counting on.
start_emulator() {
  lb_emulator valgrind -q --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.%p" "$EMULATOR" "$@"
  LB_FEATURES=$FEATURES lb_build
  HTTP=$(lb_sock shop-http) HTTPS=$(lb_sock shop-https)
  callgrind_control -i on "$EMU_PID" >/dev/null
}
start_emulator

# The nginx peer, configured as in proxy-compare.sh (keep-alive upstream, Host routing), as one
# process (master_process off) so callgrind sees the worker.
if [[ $PEER == 1 ]]; then
  # Ports the kernel picks (as load.sh does for its backend): a fixed pair collided with
  # whatever else held it while `make test` ran its tests side by side.
  free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
  NG_HTTP=$(free_port) NG_HTTPS=$(free_port)
  { ngx_head nginx "master_process off; "; cat <<EOF
  upstream shop { server 127.0.0.1:$BACKEND_PORT; keepalive 512; keepalive_requests 1000000; }
  proxy_http_version 1.1; proxy_set_header Connection "";
  ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem;
  server { listen 127.0.0.1:$NG_HTTP default_server; listen 127.0.0.1:$NG_HTTPS ssl default_server; return 404; }
  server { listen 127.0.0.1:$NG_HTTP; listen 127.0.0.1:$NG_HTTPS ssl; server_name shop.example;
           location / { proxy_pass http://shop; } }
}
EOF
  } >"$T/nginx.conf"
  valgrind -q --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.%p" \
    nginx -p "$T/nginx" -c "$T/nginx.conf" -e "$T/nginx/error.log" >"$T/nginx.log" 2>&1 &
  NG_PID=$!
  for _ in {1..300}; do (exec 3<>/dev/tcp/127.0.0.1/$NG_HTTP) 2>/dev/null && break; sleep 0.1; done
  callgrind_control -i on "$NG_PID" >/dev/null
fi

# window PID URL SECS NAME HOST [HEADER]: "requests instructions errors" of one load run against
# the process PID (under callgrind), its counters zeroed before the run.
window() {
  local pid=$1 before n errs ir dump=""
  before=$(ls "$T"/cg."$pid".* 2>/dev/null | wc -l)
  callgrind_control -z "$pid" >/dev/null
  read -r n _ _ _ errs <<<"$(load_run "$2" "${CONNS:-16}" "$3" "$5" "${6:-}")"
  callgrind_control -d "$pid" >/dev/null
  for _ in {1..100}; do # bounded wait for the dump file
    dump=$(ls -t "$T"/cg."$pid".* 2>/dev/null | head -n1)
    [[ $(ls "$T"/cg."$pid".* 2>/dev/null | wc -l) -gt $before ]] && break
    sleep 0.1
  done
  ir=$(awk '/^totals:/{print $2}' "$dump")
  if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$dump" "$KEEP/$4-$3s.cg"; fi
  [[ -n $n && -n $ir ]] || { echo "instructions.sh: no count for $2" >&2; exit 1; }
  echo "$n $ir ${errs:--}"
}

# The regression guard: the recorded figure of a row, and the change against it.
RELEASE=1
[[ $EMULATOR == */release/* ]] || RELEASE=0
recorded() { [[ -f $RECORDED ]] && awk -F'\t' -v k="$1" '$1 == k {print $2}' "$RECORDED" | tail -n1; }
FLAGGED=() MEASURED=()
compare() { # NAME VALUE: "recorded | change" cells
  local was
  was=$(recorded "$1")
  if [[ -z $was || $RELEASE == 0 || $1 == nginx* ]]; then
    [[ $RELEASE == 0 && $1 != nginx* ]] && { echo "- | not a release build"; return; }
    echo "${was:--} | -"
    return
  fi
  awk -v now="$2" -v was="$was" 'BEGIN{ d = (now - was) * 100 / was;
    printf "%d | %+.1f %%%s", was, d, (d > 10 ? " **over 10 %**" : "") }'
}

# row LABEL PID URL [HOST] [HEADER]: one table row, after a first request (what a feature sets up
# on first use, e.g. the WAF's rule set, takes long under callgrind) and a warm-up run (pools,
# caches). Responses other than 2xx are named in the requests cell: the load balancer must serve
# what it measures.
row() {
  local n1 i1 e1 n2 i2 e2 per cells name=${1// /-} host=${4:-shop.example} hdr=()
  [[ -n ${5:-} ]] && hdr=(-H "$5")
  curl -sk -o /dev/null --max-time 600 -H "Host: $host" "${hdr[@]}" "$3" || true
  load_run "$3" "${CONNS:-16}" "$(( SECS < 2 ? SECS : 2 ))" "$host" "${5:-}" >/dev/null
  read -r n1 i1 e1 <<<"$(window "$2" "$3" "$SECS" "$name" "$host" "${5:-}")"
  read -r n2 i2 e2 <<<"$(window "$2" "$3" $((2 * SECS)) "$name" "$host" "${5:-}")"
  local errs=""
  [[ $e1 != - || $e2 != - ]] && errs=" (errors: $e1 / $e2)"
  if (( n2 <= n1 )); then
    echo "instructions.sh: $1: the longer run served no more requests ($n2 <= $n1): no figure" >&2
    echo "| $1 | $n1 / $n2$errs | - | - | - |"
    return
  fi
  per=$(( (i2 - i1) / (n2 - n1) ))
  cells=$(compare "$1" "$per")
  [[ $cells == *"over 10"* ]] && FLAGGED+=("$1")
  MEASURED+=("$1	$per")
  echo "| $1 | $n1 / $n2$errs | $per | $cells |"
}

build=release
[[ $RELEASE == 1 ]] || build="not a release build ($EMULATOR)"
echo "instructions per request: $build, load $(load_kind), backend $BACKEND_KIND, ${CONNS:-16} keep-alive connections, $(date -u +%FT%TZ)"
echo
echo "| proxy, scenario | requests (runs of ${SECS} s and $((2 * SECS)) s) | user-space instructions per request | recorded | change |"
echo "|---|---:|---:|---:|---:|"
row "emulator http keep-alive" "$EMU_PID" "http://$HTTP/"
row "emulator https keep-alive" "$EMU_PID" "https://$HTTPS/"
if [[ $FEATURES == 1 ]]; then
  row "emulator http, Cloud Armor 3 CEL rules" "$EMU_PID" "http://$HTTP/" armor.example
  row "emulator http, Cloud Armor CRS WAF" "$EMU_PID" "http://$HTTP/?id=1" waf.example
  row "emulator http, Cloud CDN hit" "$EMU_PID" "http://$HTTP/" cdn-hit.example
  row "emulator http, Cloud CDN miss" "$EMU_PID" "http://$HTTP/" cdn-miss.example
  row "emulator http, IAP with a session" "$EMU_PID" "http://$HTTP/" iap.example "Cookie: $(lb_iap_cookie "$HTTP")"
  row "emulator http, request logging (sampleRate 1)" "$EMU_PID" "http://$HTTP/" log.example
fi
if [[ $PEER == 1 ]]; then
  row "nginx http keep-alive" "$NG_PID" "http://127.0.0.1:$NG_HTTP/"
  row "nginx https keep-alive" "$NG_PID" "https://127.0.0.1:$NG_HTTPS/"
fi
if [[ $FEATURES == 1 ]]; then
  # Firewall enforcement's price: the same plain row on an emulator that does not enforce.
  kill -TERM "$EMU_PID" 2>/dev/null || true
  wait "$EMU_PID" 2>/dev/null || true
  start_emulator --enforce-firewall=false
  row "emulator http keep-alive, firewall not enforced" "$EMU_PID" "http://$HTTP/"
fi

if [[ ${#FLAGGED[@]} -gt 0 ]]; then
  echo
  echo "instructions.sh: more than 10 % over the recorded figure (benches/instructions-recorded.tsv): ${FLAGGED[*]}"
fi
if [[ ${RECORD:-0} == 1 ]]; then
  {
    echo "# scenario	instructions per request	(instructions.sh RECORD=1, $(date -u +%F), $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown))"
    printf '%s\n' "${MEASURED[@]}"
  } >"$RECORDED"
  echo "instructions.sh: recorded in $RECORDED" >&2
fi
