# egress_probe.py — runs inside an egress sandbox (python3 -c): what a
# process there can and cannot reach. argv: MODE CA_PEM GATEWAY HTTPS_PORT
# HTTP_PORT DIRECT_PORT UDP_PORT. Prints KEY=VALUE lines for test_egress.c.
import os, socket, ssl, sys, urllib.error, urllib.request

mode, ca, gw = sys.argv[1], sys.argv[2], sys.argv[3]
hp, pp, dp, up = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
ctx = ssl.create_default_context(cadata=ca)

def get(url, **kw):
    try:
        return urllib.request.urlopen(url, timeout=15, **kw).read().decode().strip()
    except urllib.error.HTTPError as e:
        return "http-%d:%s" % (e.code, e.read().decode().strip())
    except Exception as e:
        return "fail:%s" % (str(e).replace("\n", " "),)

def raw(req):
    s = socket.create_connection((gw, 3128), timeout=15)
    s.sendall(req)
    out = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        out += b
    return out.decode(errors="replace").replace("\r\n", "|")

def tunnel(host, sni):
    s = socket.create_connection((gw, 3128), timeout=15)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, hp, host, hp)).encode())
    head = s.recv(4096).decode().split("\r\n")[0]
    try:
        t = ctx.wrap_socket(s, server_hostname=sni)
        t.sendall(("GET /t HTTP/1.0\r\nHost: %s\r\n\r\n" % sni).encode())
        return head + "|tls-ok|" + t.recv(4096).decode().split("\r\n")[0]
    except Exception as e:
        return head + "|tls-fail:" + type(e).__name__

if mode == "get":
    print("HTTPS=" + get("https://allowed.brig.test:%d/a" % hp, context=ctx))
    sys.exit(0)

print("HTTPS=" + get("https://allowed.brig.test:%d/a" % hp, context=ctx))
print("HTTP=" + get("http://allowed.brig.test:%d/b" % pp))
print("DENIED=" + raw(("CONNECT denied.brig.test:%d HTTP/1.1\r\nHost: denied.brig.test:%d\r\n\r\n" % (hp, hp)).encode()))
# Allowed by a rule, but the name is the host's own (/etc/hosts: no DNS).
print("LOCAL=" + raw(("CONNECT localhost:%d HTTP/1.1\r\nHost: localhost:%d\r\n\r\n" % (hp, hp)).encode()))
print("SNI=" + tunnel("allowed.brig.test", "denied.brig.test"))
print("SNI_OK=" + tunnel("allowed.brig.test", "allowed.brig.test"))
print("HOSTHDR=" + raw(("GET http://allowed.brig.test:%d/ HTTP/1.1\r\nHost: denied.brig.test:%d\r\n\r\n" % (pp, pp)).encode()))
# No proxy: nothing at all.
noproxy = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx))
try:
    noproxy.open("https://allowed.brig.test:%d/a" % hp, timeout=5)
    print("NOPROXY=reached")
except Exception as e:
    print("NOPROXY=fail:" + type(e).__name__)
try:
    socket.getaddrinfo("allowed.brig.test", 443)
    print("DNS=resolved")
except Exception as e:
    print("DNS=fail")
s = socket.socket()
s.settimeout(3)
try:
    s.connect((gw, dp))
    print("DIRECT=connected")
except Exception as e:
    print("DIRECT=fail:" + type(e).__name__)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", (gw, up))
    print("UDP=sent")
except Exception as e:
    print("UDP=fail:" + type(e).__name__)
routes = [l.split() for l in open("/proc/net/route").read().splitlines()[1:] if l.strip()]
print("DEFAULT_ROUTE=%s" % ("yes" if any(r[1] == "00000000" for r in routes) else "no"))
print("ROUTES=%d" % len(routes))
try:
    v6 = [l for l in open("/proc/net/if_inet6").read().splitlines() if l.split()[5] != "lo" and l.split()[3] == "00"]
except OSError:
    v6 = []
print("IPV6_GLOBAL=%d" % len(v6))
ns = [l.split()[1] for l in open("/etc/resolv.conf").read().splitlines() if l.startswith("nameserver")]
print("NAMESERVERS=" + ",".join(ns))
