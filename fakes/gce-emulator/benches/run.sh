#!/usr/bin/env bash
# Data plane benchmark (`make bench`): the emulator's load balancer side by side with nginx and
# haproxy, measured by ../shared/bench/proxy-compare.sh in one run on this machine.
#
# 1. builds gce-emulator in release mode and starts it pinned to CPU 0 (like the peers) with ONE
#    data plane worker thread (--dataplane-threads 1), ephemeral listener ports and the
#    emulator's defaults (NEG endpoints validated against their instance, firewall enforced);
# 2. builds one load balancer through the REST API with curl, as a user would (lb.sh): the
#    backend's VM and the firewall rule admitting Google's ranges to it, NEG endpoint
#    127.0.0.1:18081 on that VM, backend service, URL map (host rule shop.example), target HTTP
#    and HTTPS proxies (self-signed ECDSA P-256 certificate), two global forwarding rules;
# 3. runs proxy-compare.sh --target http://IP:PORT/ --target-tls https://IP:PORT/ --target-pid PID
#    and prints its `target` rows as `emulator`.
#    Without proxy-compare.sh, or without nginx, haproxy or wrk (a user's clone has no
#    ../shared/), it says why and measures the emulator alone (load.sh: nginx and wrk if
#    installed, else loadgen.py), scenarios ka64 and tls64, in the same table's columns.
#
# The backend service has no health check: proxy-compare.sh starts the backend (127.0.0.1:18081)
# only after the load balancer exists and checks routing at once, before a probe could pass.
#
# 4. then the control-plane benchmark (benches/control_plane.rs: insert/get/list/aggregatedList
#    over real HTTP against the same release binary on one core), built in the dev profile
#    because only the emulator it drives is measured.
#
# Environment: EMULATOR (prebuilt binary, skips the build), COMPARE (script path), NICE (the
# priority of the emulator and, through --nice, of the peers; default -20 as root, else 0),
# COMPARE_ARGS (extra arguments, e.g. "--duration 5 --runs 1"), DURATION (seconds per run when
# the emulator is measured alone; default 15), INSTALL=1 (pass --install),
# ROUNDS (run proxy-compare.sh that many times and add a table of per-round ratios to nginx:
# median and range; default 1),
# IDLE_CONNS (idle connections for the memory figure, default 2000), BENCH_SCALE (control-plane
# phase size, default 1; 0.1 shrinks it), CONTROL_PLANE=0 (skip the control-plane benchmark).
# Only 127.0.0.1 and the emulator's loopback addresses are contacted.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
COMPARE=${COMPARE:-$REPO/../shared/bench/proxy-compare.sh}
# Why the emulator is measured alone, if it is: the comparison needs proxy-compare.sh and the
# tools it drives (INSTALL=1 lets it install them).
ALONE=""
if [[ ! -f $COMPARE ]]; then
  ALONE="proxy-compare.sh not found ($COMPARE)"
elif [[ ${INSTALL:-0} != 1 ]]; then
  for c in nginx haproxy wrk; do
    command -v $c >/dev/null || { ALONE="$c is not installed (INSTALL=1 installs it)"; break; }
  done
fi

# shellcheck source=lb.sh
source "$HERE/lb.sh"
# shellcheck source=load.sh
source "$HERE/load.sh"
lb_binary

T=$(mktemp -d /tmp/dataplane-bench.XXXXXX)
EMU_PID="" BE_PID=""
cleanup() {
  for p in $EMU_PID $BE_PID; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT

# The peers and the backend run under `nice -n NICE` (proxy-compare.sh's default: -20 as root)
# on CPU 0. The emulator gets the same: at nice 0 beside a nice -20 backend on one CPU, the
# scheduler would hand the CPU to the backend at every upstream write, one request at a time.
NICE=${NICE:-$([[ $EUID == 0 ]] && echo -20 || echo 0)}
lb_emulator taskset -c "${PCPU:-0}" nice -n "$NICE" "$EMULATOR"
[[ -n $ALONE ]] && load_backend
lb_build
HTTP=$(lb_sock shop-http) HTTPS=$(lb_sock shop-https)
echo "run.sh: target http://$HTTP/ and https://$HTTPS/" >&2

if [[ -n $ALONE ]]; then
  echo "run.sh: the emulator alone, no nginx and haproxy rows: $ALONE" >&2
  DURATION=${DURATION:-15}
  cpu_us() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.0f", ($14 + $15) * 1e6 / hz}' "/proc/$EMU_PID/stat"; }
  fmt_us() { awk -v u="$1" 'BEGIN{ if (u >= 1000) printf "%.2fms", u/1000; else printf "%.0fus", u }'; }
  echo "emulator alone ($ALONE), load $(load_kind), backend $BACKEND_KIND, ${DURATION}s/run, nice $NICE," \
    "emulator+backend on CPU ${PCPU:-0}, load on CPU ${LCPU:-1}, $(nproc) CPUs, $(uname -r), $(date -u +%FT%TZ)"
  echo
  echo "| proxy | scenario | RPS | p50 | p99 | RPS vs nginx | proxy CPU us/req | CPU % proxy/backend/wrk/other | wrk errors |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
  for sc in ka64 tls64; do
    url="http://$HTTP/"
    [[ $sc == tls64 ]] && url="https://$HTTPS/"
    c0=$(cpu_us)
    read -r n rps p50 p99 errs <<<"$(load_run "$url" 64 "$DURATION")"
    c1=$(cpu_us)
    per=$(awk -v c=$((c1 - c0)) -v n="${n:-0}" 'BEGIN{printf "%.1f", n > 0 ? c / n : 0}')
    printf '| emulator | %s | %.0f | %s | %s | - | %s | - | %s |\n' "$sc" "${rps:-0}" "$(fmt_us "${p50:-0}")" \
      "$(fmt_us "${p99:-0}")" "$per" "${errs:--}"
  done
fi

args=(--target "http://$HTTP/" --target-tls "https://$HTTPS/" --target-pid "$EMU_PID" --nice "$NICE")
install=()
[[ ${INSTALL:-0} == 1 ]] && install=(--install)
ROUNDS=${ROUNDS:-1}
[[ -n $ALONE ]] && ROUNDS=0
for ((round = 1; round <= ROUNDS; round++)); do
  [[ $ROUNDS -gt 1 ]] && echo "run.sh: round $round of $ROUNDS" >&2
  # shellcheck disable=SC2086
  bash "$COMPARE" "${install[@]}" "${args[@]}" ${COMPARE_ARGS:-} | sed -u 's/^| target |/| emulator |/' | tee -a "$T/tables"
  install=()
done

# With ROUNDS > 1: each proxy's figures relative to nginx's in the same round, then the median
# and range over the rounds. Load from other tenants comes and goes within minutes; a ratio
# taken within one round and repeated shows through it where one long run does not.
if [[ $ROUNDS -gt 1 ]]; then
  python3 - "$T/tables" <<'PY'
import statistics, sys
def us(v):
    return float(v[:-2]) * 1000 if v.endswith("ms") else float(v[:-2])
rounds, cur = [], None
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if line.startswith("| proxy |"):
        cur = {}
        rounds.append(cur)
    elif cur is not None and len(cells) >= 7 and cells[2].isdigit():
        cur[(cells[0], cells[1])] = (float(cells[2]), us(cells[4]))
keys = sorted({k for r in rounds for k in r if k[0] not in ("nginx", "backend-direct")},
              key=lambda k: (k[1], k[0]))
print()
print("| proxy | scenario | rounds | RPS vs nginx, median (min-max) | p99 vs nginx's, median (min-max) |")
print("|---|---|---:|---:|---:|")
for proxy, sc in keys:
    pairs = [(r[(proxy, sc)], r[("nginx", sc)]) for r in rounds if (proxy, sc) in r and ("nginx", sc) in r]
    rps = [a[0] / b[0] for a, b in pairs if b[0] > 0]
    p99 = [a[1] / b[1] for a, b in pairs if b[1] > 0]
    f = lambda xs: f"{statistics.median(xs):.2f}x ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"
    print(f"| {proxy} | {sc} | {len(pairs)} | {f(rps)} | {f(p99)} |")
PY
fi

# Memory per idle client connection: RSS growth of the emulator while N connections that each
# completed one request (HTTP), then N more that each completed a TLS handshake plus one request
# (HTTPS), stay open. The HTTP connections stay open while the HTTPS ones are measured, so the
# HTTPS figure cannot reuse memory the allocator kept from closed HTTP connections.
python3 - "$EMU_PID" "$HTTP" "$HTTPS" "${IDLE_CONNS:-2000}" <<'PY'
import resource, socket, ssl, sys, time
pid, http, https, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * n + 100)), hard))
def rss():
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
def addr(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
rows, conns = [], []
for name, target, tls in (("http keep-alive", http, False), ("https keep-alive", https, True)):
    time.sleep(1); before = rss()
    for _ in range(n):
        s = socket.create_connection(addr(target), timeout=10)
        if tls:
            s = ctx.wrap_socket(s, server_hostname="shop.example")
        s.sendall(b"GET / HTTP/1.1\r\nHost: shop.example\r\n\r\n")
        s.recv(4096)
        conns.append(s)
    time.sleep(1); after = rss()
    rows.append((name, n, (after - before) * 1024 / n))
for s in conns:
    s.close()
print()
print("| emulator idle connections | count | RSS growth per connection |")
print("|---|---:|---:|")
for name, count, per in rows:
    print(f"| {name} | {count} | {per / 1024:.1f} KiB |")
PY

# The data plane's emulator is stopped first so the control-plane run has CPU 0 to itself.
kill -TERM "$EMU_PID" 2>/dev/null; wait "$EMU_PID" 2>/dev/null || true; EMU_PID=""
if [[ ${CONTROL_PLANE:-1} != 0 ]]; then
  (cd "$REPO" && GCE_EMULATOR_BIN=$EMULATOR cargo bench -q -p gce-emulator --bench control_plane --profile dev)
fi
