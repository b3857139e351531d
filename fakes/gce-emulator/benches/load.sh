# load.sh: sourced by the data plane benchmarks (run.sh, instructions.sh). A backend and a load
# generator for the emulator, whatever this machine has: nginx and wrk when installed (as
# ../shared/bench/proxy-compare.sh drives them), else loadgen.py (Python, standard library),
# whose own speed then bounds the figures.
#
#   load_backend        starts the backend on 127.0.0.1:BACKEND_PORT (an ephemeral port unless
#                       set) answering 200 with proxy-compare.sh's 100-byte body; sets
#                       BACKEND_PORT (exported: lb_build points the NEG at it), BE_PID and
#                       BACKEND_KIND. Needs T, a scratch directory; NICE and PCPU as in run.sh.
#   load_kind           what load_run uses, for a table's header.
#   load_run URL CONNS SECS [HOST] [HEADER]
#                       one run of SECS seconds over CONNS keep-alive connections with `Host:
#                       HOST` (default shop.example) and HEADER ("Name: value") if given, on CPU
#                       LCPU (default 1); prints
#                       "requests rps p50_us p99_us errors" (errors `-` when none).

load_backend() {
  local pad
  pad=$(printf 'x%.0s' {1..95})
  if [[ -z ${BACKEND_PORT:-} ]]; then
    BACKEND_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  fi
  export BACKEND_PORT
  if command -v nginx >/dev/null; then
    mkdir -p "$T/backend"
    cat >"$T/backend.conf" <<EOF
daemon off; worker_processes 1; pid $T/backend/nginx.pid; error_log $T/backend/error.log warn;
events { worker_connections 8192; }
http {
  access_log off; default_type text/plain; keepalive_requests 1000000;
  client_body_temp_path $T/backend/cb; proxy_temp_path $T/backend/px; fastcgi_temp_path $T/backend/fc;
  uwsgi_temp_path $T/backend/uw; scgi_temp_path $T/backend/sc;
  server { listen 127.0.0.1:$BACKEND_PORT; return 200 "shop$pad\n"; }
}
EOF
    taskset -c "${PCPU:-0}" nice -n "${NICE:-0}" nginx -p "$T/backend" -c "$T/backend.conf" \
      -e "$T/backend/error.log" >"$T/backend.log" 2>&1 &
    BE_PID=$! BACKEND_KIND="nginx $(nginx -v 2>&1 | sed 's/.*\///')"
  else
    taskset -c "${PCPU:-0}" python3 "$(dirname "${BASH_SOURCE[0]}")/loadgen.py" backend "$T/backend.port" \
      >"$T/backend.log" 2>&1 &
    BE_PID=$! BACKEND_KIND="loadgen.py (Python)"
    for _ in {1..100}; do [[ -s $T/backend.port ]] && break; sleep 0.1; done
    BACKEND_PORT=$(cat "$T/backend.port")
  fi
  for _ in {1..100}; do (exec 3<>"/dev/tcp/127.0.0.1/$BACKEND_PORT") 2>/dev/null && return 0; sleep 0.1; done
  cat "$T/backend.log" >&2
  echo "load.sh: the backend did not listen on 127.0.0.1:$BACKEND_PORT" >&2
  exit 1
}

load_kind() {
  if command -v wrk >/dev/null; then echo "wrk -t1"; else echo "loadgen.py (Python: its own limit, not the proxy's)"; fi
}

load_run() {
  local out host=${4:-shop.example} extra=()
  [[ -n ${5:-} ]] && extra=("$5")
  if command -v wrk >/dev/null; then
    local h=()
    [[ -n ${5:-} ]] && h=(-H "$5")
    out=$(taskset -c "${LCPU:-1}" wrk -t1 -c"$2" -d"$3s" --latency -H "Host: $host" "${h[@]}" "$1")
    awk 'function us(v) { return v ~ /us$/ ? v + 0 : v ~ /ms$/ ? (v + 0) * 1000 : (v + 0) * 1e6 }
      /requests in/ {n = $1} /^Requests\/sec/ {r = $2} $1 == "50%" {p50 = us($2)} $1 == "99%" {p99 = us($2)}
      /Non-2xx/ {e = e $NF "non-2xx;"} /Socket errors/ {e = e "socket;"}
      END {printf "%s %s %s %s %s\n", n, r, p50, p99, (e == "" ? "-" : e)}' <<<"$out"
  else
    out=$(taskset -c "${LCPU:-1}" python3 "$(dirname "${BASH_SOURCE[0]}")/loadgen.py" load "$1" "$2" "$3" "Host: $host" "${extra[@]}")
    awk '/requests in/ {n = $1} /^Requests\/sec/ {r = $2} /^p50/ {p50 = $2} /^p99/ {p99 = $2}
      /^non-2xx/ {b = $2} /^errors/ {e = $2}
      END {printf "%s %s %s %s %s\n", n, r, p50, p99, (b + e > 0 ? b "non-2xx;" e "errors" : "-")}' <<<"$out"
  fi
}
