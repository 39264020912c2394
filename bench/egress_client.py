# egress_client.py — the client side of bench/egress: small HTTPS requests
# (a new connection each) and one large download, through the egress proxy
# (inside a sandbox) or straight to the upstream (on the host).
# argv: proxy|direct HOST PORT CA_FILE SMALL_N BIG_BYTES. Prints JSON.
import http.client, json, socket, ssl, sys, time

mode, host, port, ca, small_n, big = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
ctx = ssl.create_default_context(cafile=ca)

class Direct(http.client.HTTPSConnection):
    def connect(self):
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.sock = ctx.wrap_socket(s, server_hostname=host)

def conn():
    if mode == "proxy":
        c = http.client.HTTPSConnection("172.30.4.1", 3128, context=ctx, timeout=60)
        c.set_tunnel(host, port)
        return c
    return Direct(host, port, context=ctx, timeout=60)

def get(path):
    c = conn()
    c.request("GET", path)
    r = c.getresponse()
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    c.close()
    return n

lat = []
for i in range(small_n + 3):
    t = time.perf_counter()
    get("/small")
    if i >= 3:  # warm-up
        lat.append((time.perf_counter() - t) * 1000)
lat.sort()
t = time.perf_counter()
got = get("/bytes/%d" % big)
dt = time.perf_counter() - t
print(json.dumps({"p50_ms": lat[len(lat) // 2], "p95_ms": lat[int(len(lat) * 0.95)], "mb_s": got / dt / 1e6,
                  "bytes": got}))
