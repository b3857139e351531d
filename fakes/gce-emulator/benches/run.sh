#!/usr/bin/env bash
# Data plane benchmark (`make bench`): the emulator's load balancer side by side with nginx and
# haproxy, measured by ../shared/bench/proxy-compare.sh in one run on this machine.
#
# 1. builds gce-emulator in release mode and starts it pinned to CPU 0 (like the peers) with ONE
#    data plane worker thread (--dataplane-threads 1) and ephemeral listener ports;
# 2. builds one load balancer through the REST API with curl (lb.sh): NEG endpoint
#    127.0.0.1:18081, backend service, URL map (host rule shop.example), target HTTP and HTTPS
#    proxies (self-signed ECDSA P-256 certificate), two global forwarding rules;
# 3. runs proxy-compare.sh --target http://IP:PORT/ --target-tls https://IP:PORT/ --target-pid PID.
#
# The backend service has no health check: proxy-compare.sh starts the backend (127.0.0.1:18081)
# only after the load balancer exists and checks routing at once, before a probe could pass.
#
# 4. then the control-plane benchmark (benches/control_plane.rs: insert/get/list/aggregatedList
#    over real HTTP against the same release binary on one core), built in the dev profile
#    because only the emulator it drives is measured.
#
# Environment: EMULATOR (prebuilt binary, skips the build), COMPARE (script path),
# COMPARE_ARGS (extra arguments, e.g. "--duration 5 --runs 1"), INSTALL=1 (pass --install),
# IDLE_CONNS (idle connections for the memory figure, default 2000), BENCH_SCALE (control-plane
# phase size, default 1; 0.1 shrinks it), CONTROL_PLANE=0 (skip the control-plane benchmark).
# Only 127.0.0.1 and the emulator's loopback addresses are contacted.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
COMPARE=${COMPARE:-$REPO/../shared/bench/proxy-compare.sh}
[[ -f $COMPARE ]] || { echo "run.sh: proxy-compare.sh not found (set COMPARE)" >&2; exit 2; }

# shellcheck source=lb.sh
source "$HERE/lb.sh"
lb_binary

T=$(mktemp -d /tmp/dataplane-bench.XXXXXX)
EMU_PID=""
cleanup() { [[ -n $EMU_PID ]] && kill -TERM "$EMU_PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT

lb_emulator taskset -c "${PCPU:-0}" "$EMULATOR"
lb_build
HTTP=$(lb_sock shop-http) HTTPS=$(lb_sock shop-https)
echo "run.sh: target http://$HTTP/ and https://$HTTPS/" >&2

args=(--target "http://$HTTP/" --target-tls "https://$HTTPS/" --target-pid "$EMU_PID")
[[ ${INSTALL:-0} == 1 ]] && args=(--install "${args[@]}")
# shellcheck disable=SC2086
bash "$COMPARE" "${args[@]}" ${COMPARE_ARGS:-}

# Memory per idle client connection: RSS growth of the emulator while N connections that each
# completed one request (HTTP) or a TLS handshake plus one request (HTTPS) stay open.
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
rows = []
for name, target, tls in (("http keep-alive", http, False), ("https keep-alive", https, True)):
    time.sleep(1); before = rss(); conns = []
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
