#!/usr/bin/env bash
# Instructions per proxied request (`make bench-instructions`): the data plane's CPU cost counted
# by valgrind's callgrind. Unlike the wall-clock figures of run.sh it does not move with other
# load on a shared machine, so a change of a few percent on the request path shows. It counts
# user-space instructions only: the kernel's share (loopback TCP, about 60 % of the proxy's CPU
# time, the same as nginx's) is not in it.
#
# 1. builds gce-emulator (release) unless EMULATOR is set and starts it under callgrind with
#    instrumentation off; a backend nginx answers on 127.0.0.1:18081 (a 100-byte body, as in
#    ../shared/bench/proxy-compare.sh);
# 2. builds run.sh's load balancer (lb.sh); starts the nginx peer of proxy-compare.sh (same
#    configuration, one process) under callgrind on 127.0.0.1:18181 and :18443 (TLS);
# 3. per proxy and scheme (HTTP, HTTPS), after a warm-up: counts instructions over a wrk run of
#    SECS and one of 2 x SECS seconds (CONNS keep-alive connections each, default 16);
#    instructions per request = the difference of the counts over the difference of the
#    requests, which cancels what a run costs once (new connections, TLS handshakes).
#
# Environment: EMULATOR (prebuilt binary, skips the build), SECS (default 5), CONNS (default 16),
# INSTALL=1 (apt-get install valgrind nginx wrk first), PEER=0 (skip nginx), KEEP=DIR (copy the
# callgrind dump of each run there, e.g. DIR/emulator-https-keep-alive-10s.cg, for
# `callgrind_annotate`). Only 127.0.0.1 and the emulator's loopback addresses are contacted;
# every run is bounded in time.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
SECS=${SECS:-5}
if [[ ${INSTALL:-0} == 1 ]]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind nginx wrk >&2
fi
for c in valgrind callgrind_control nginx wrk curl openssl; do
  command -v $c >/dev/null || { echo "instructions.sh: $c missing (INSTALL=1 installs it)" >&2; exit 2; }
done
# shellcheck source=lb.sh
source "$HERE/lb.sh"
lb_binary
(exec 3<>/dev/tcp/127.0.0.1/18081) 2>/dev/null && { echo "instructions.sh: 127.0.0.1:18081 is in use" >&2; exit 2; }

T=$(mktemp -d /tmp/dataplane-instructions.XXXXXX)
EMU_PID="" BE_PID="" NG_PID=""
cleanup() {
  for p in $EMU_PID $NG_PID $BE_PID; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

PAD=$(printf 'x%.0s' {1..95})
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
{ ngx_head backend; cat <<EOF
  server { listen 127.0.0.1:18081; return 200 "shop$PAD\n"; }
}
EOF
} >"$T/backend.conf"
nginx -p "$T/backend" -c "$T/backend.conf" -e "$T/backend/error.log" >"$T/backend.log" 2>&1 &
BE_PID=$!

lb_emulator valgrind -q --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.%p" "$EMULATOR"
lb_build
HTTP=$(lb_sock shop-http) HTTPS=$(lb_sock shop-https)
callgrind_control -i on "$EMU_PID" >/dev/null

# The nginx peer, configured as in proxy-compare.sh (keep-alive upstream, Host routing), as one
# process (master_process off) so callgrind sees the worker.
if [[ ${PEER:-1} == 1 ]]; then
  (exec 3<>/dev/tcp/127.0.0.1/18181) 2>/dev/null && { echo "instructions.sh: 127.0.0.1:18181 is in use" >&2; exit 2; }
  { ngx_head nginx "master_process off; "; cat <<EOF
  upstream shop { server 127.0.0.1:18081; keepalive 512; keepalive_requests 1000000; }
  proxy_http_version 1.1; proxy_set_header Connection "";
  ssl_certificate $T/cert.pem; ssl_certificate_key $T/key.pem;
  server { listen 127.0.0.1:18181 default_server; listen 127.0.0.1:18443 ssl default_server; return 404; }
  server { listen 127.0.0.1:18181; listen 127.0.0.1:18443 ssl; server_name shop.example;
           location / { proxy_pass http://shop; } }
}
EOF
  } >"$T/nginx.conf"
  valgrind -q --tool=callgrind --instr-atstart=no --callgrind-out-file="$T/cg.%p" \
    nginx -p "$T/nginx" -c "$T/nginx.conf" -e "$T/nginx/error.log" >"$T/nginx.log" 2>&1 &
  NG_PID=$!
  for _ in {1..300}; do (exec 3<>/dev/tcp/127.0.0.1/18181) 2>/dev/null && break; sleep 0.1; done
  callgrind_control -i on "$NG_PID" >/dev/null
fi

# window PID URL SECS NAME: "requests instructions" of one wrk run against the process PID
# (under callgrind), its counters zeroed before the run.
window() {
  local pid=$1 before n ir dump=""
  before=$(ls "$T"/cg."$pid".* 2>/dev/null | wc -l)
  callgrind_control -z "$pid" >/dev/null
  n=$(wrk -t1 -c"${CONNS:-16}" -d"$3"s -H 'Host: shop.example' "$2" | awk '/requests in/{print $1}')
  callgrind_control -d "$pid" >/dev/null
  for _ in {1..100}; do # bounded wait for the dump file
    dump=$(ls -t "$T"/cg."$pid".* 2>/dev/null | head -n1)
    [[ $(ls "$T"/cg."$pid".* 2>/dev/null | wc -l) -gt $before ]] && break
    sleep 0.1
  done
  ir=$(awk '/^totals:/{print $2}' "$dump")
  if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$dump" "$KEEP/$4-$3s.cg"; fi
  [[ -n $n && -n $ir ]] || { echo "instructions.sh: no count for $2" >&2; exit 1; }
  echo "$n $ir"
}

# row LABEL PID URL: one table row, after a warm-up run (pools, caches).
row() {
  local n1 i1 n2 i2 name=${1// /-}
  wrk -t1 -c"${CONNS:-16}" -d2s -H 'Host: shop.example' "$3" >/dev/null
  read -r n1 i1 <<<"$(window "$2" "$3" "$SECS" "$name")"
  read -r n2 i2 <<<"$(window "$2" "$3" $((2 * SECS)) "$name")"
  (( n2 > n1 )) || { echo "instructions.sh: the longer run served fewer requests ($n2 <= $n1)" >&2; exit 1; }
  echo "| $1 | $n1 / $n2 | $(( (i2 - i1) / (n2 - n1) )) |"
}

echo "| proxy, scheme | requests (runs of ${SECS} s and $((2 * SECS)) s) | user-space instructions per request |"
echo "|---|---:|---:|"
row "emulator http keep-alive" "$EMU_PID" "http://$HTTP/"
row "emulator https keep-alive" "$EMU_PID" "https://$HTTPS/"
if [[ ${PEER:-1} == 1 ]]; then
  row "nginx http keep-alive" "$NG_PID" "http://127.0.0.1:18181/"
  row "nginx https keep-alive" "$NG_PID" "https://127.0.0.1:18443/"
fi
