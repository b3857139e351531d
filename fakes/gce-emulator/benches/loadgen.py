#!/usr/bin/env python3
"""loadgen.py: what the data plane benchmarks use when nginx or wrk is not installed (a user's
clone has neither, nor ../shared/bench/proxy-compare.sh). Standard library only.

  loadgen.py backend PORT_FILE
      An HTTP/1.1 keep-alive backend on 127.0.0.1, ephemeral port (written to PORT_FILE once
      listening), answering every request 200 with the 100-byte body of proxy-compare.sh's
      backend ("shop" + 95 x + newline). Runs until killed.

  loadgen.py load URL CONNS SECS [HEADER ...]
      CONNS keep-alive connections (one thread each) sending GET URL for SECS seconds, with
      `Host: shop.example` unless a HEADER ("Name: value") names another Host. TLS is not
      verified. Prints one line as wrk's summary reads: `N requests in SECS s`, then
      `Requests/sec R`, `p50 US` and `p99 US` (microseconds) and `non-2xx E` / `errors E`.

Only loopback (127.0.0.0/8) URLs are accepted. Its throughput is Python's (a few thousand
requests per second), far below the proxy's: figures taken with it show that the benchmark runs,
not how fast the proxy is.
"""

import http.client
import http.server
import socket
import socketserver
import ssl
import sys
import threading
import time
import os
import urllib.parse

BODY = b"shop" + b"x" * 95 + b"\n"
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        # One write per response and no Nagle: else the body waits for the client's delayed ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self):
        self.wfile.write(RESPONSE)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def backend(port_file):
    srv = Server(("127.0.0.1", 0), Handler)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(port_file + ".tmp", port_file)
    srv.serve_forever()


def load(url, conns, secs, headers):
    u = urllib.parse.urlsplit(url)
    if not (u.hostname or "").startswith("127."):
        sys.exit(f"loadgen.py: only loopback URLs: {url}")
    hdrs = {"Host": "shop.example"}
    for h in headers:
        k, _, v = h.partition(":")
        hdrs[k.strip()] = v.strip()
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + secs
    lock = threading.Lock()
    lat, counts = [], {"ok": 0, "non2xx": 0, "errors": 0}

    def worker():
        mine, ok, bad, errs = [], 0, 0, 0
        c = None
        while time.monotonic() < deadline:
            try:
                if c is None:
                    if u.scheme == "https":
                        c = http.client.HTTPSConnection(u.hostname, u.port, timeout=10, context=ctx)
                    else:
                        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
                    c.connect()
                    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                t0 = time.monotonic()
                c.request("GET", path, headers=hdrs)
                r = c.getresponse()
                r.read()
                mine.append(time.monotonic() - t0)
                if 200 <= r.status < 300:
                    ok += 1
                else:
                    bad += 1
            except Exception:
                errs += 1
                c = None
                time.sleep(0.01)
        with lock:
            lat.extend(mine)
            counts["ok"] += ok
            counts["non2xx"] += bad
            counts["errors"] += errs

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - start
    n = counts["ok"] + counts["non2xx"]
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e6 if lat else 0
    print(f"{n} requests in {took:.2f}s")
    print(f"Requests/sec {n / took:.1f}")
    print(f"p50 {pct(0.5):.0f}")
    print(f"p99 {pct(0.99):.0f}")
    print(f"non-2xx {counts['non2xx']}")
    print(f"errors {counts['errors']}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "backend":
        backend(sys.argv[2])
    elif len(sys.argv) >= 5 and sys.argv[1] == "load":
        load(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:])
    else:
        sys.exit(__doc__)
