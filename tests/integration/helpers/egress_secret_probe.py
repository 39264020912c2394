# egress_secret_probe.py — runs inside an egress computer with a secret
# (test_egress_secret): the placeholder it holds, what the upstreams saw
# of it (the secret's host through brig's TLS, another host spliced), and
# what the proxy refuses inside the tunnel. The upstream records what it saw
# on the host and answers "recorded": the probe never learns the value.
# argv: PORT TEST_CA_PEM. Prints KEY=VALUE lines.
import http.client, os, ssl, sys, urllib.request

port, testca = sys.argv[1], sys.argv[2]
ph = os.environ.get("BRIG_TEST_SECRET", "")
print("PH=" + ph)
print("SSL_CERT_FILE=" + os.environ.get("SSL_CERT_FILE", ""))

def auth_seen(host, ctx, path="/headers", data=None):
    try:
        req = urllib.request.Request("https://%s:%s%s" % (host, port, path), data=data,
                                     headers={"Authorization": "Bearer " + ph, "X-Twice": ph + "," + ph})
        return urllib.request.urlopen(req, timeout=90, context=ctx).read().decode().strip()
    except Exception as e:
        return "fail: %s" % e

# The secret's host: brig's authority, trusted through SSL_CERT_FILE.
print("SECRET=" + auth_seen("secret.brig.test", ssl.create_default_context()))
print("SECRET_POST=" + auth_seen("secret.brig.test", ssl.create_default_context(), "/post", ph.encode()))
# Another allowed host: spliced, its own certificate (the test's CA).
print("OTHER=" + auth_seen("other.brig.test", ssl.create_default_context(cadata=testca)))
# brig's authority vouches for no other host.
print("OTHER_DEFAULT=" + auth_seen("other.brig.test", ssl.create_default_context()))

# An upstream that echoes the request's headers: the bound header's value
# must not come back (the proxy cuts the tunnel); a placeholder in another
# header arrives as the placeholder, so its echo is harmless.
def echoed(method, headers):
    try:
        c = http.client.HTTPSConnection("172.30.4.1", 3128, context=ssl.create_default_context(), timeout=90)
        c.set_tunnel("secret.brig.test", int(port))
        c.request(method, "/echo", headers=headers)
        return c.getresponse().read().decode().replace("\n", " | ")
    except Exception as e:
        return "fail: %s" % type(e).__name__
print("ECHO=" + echoed("GET", {"Authorization": "Bearer " + ph}))
print("TRACE=" + echoed("TRACE", {"Authorization": "Bearer " + ph}))
print("ECHO_UNBOUND=" + echoed("GET", {"X-Echo": ph}))

# A client that does not trust brig's authority: the proxy's TLS fails.
print("UNTRUSTING=" + auth_seen("secret.brig.test", ssl.create_default_context(cadata=testca)))
# A secret's host whose real certificate does not name it: the proxy
# refuses to go on (it verifies the upstream).
print("NOSAN=" + auth_seen("nosan.brig.test", ssl.create_default_context()))

# Inside the tunnel, a request naming another host is refused.
try:
    c = http.client.HTTPSConnection("172.30.4.1", 3128, context=ssl.create_default_context(), timeout=90)
    c.set_tunnel("secret.brig.test", int(port))
    c.request("GET", "/headers", headers={"Host": "other.brig.test", "Authorization": "Bearer " + ph})
    print("HOSTMISMATCH=" + c.getresponse().read().decode().replace("\n", " | "))
except Exception as e:
    print("HOSTMISMATCH=fail: %s" % type(e).__name__)

# Bytes sent behind CONNECT before the proxy answered: refused for a
# secret's host (the proxy's TLS must be the first thing said).
import socket
try:
    s = socket.create_connection(("172.30.4.1", 3128), timeout=30)
    s.sendall(b"CONNECT secret.brig.test:%s HTTP/1.1\r\nHost: secret.brig.test:%s\r\n\r\n\x16\x03\x01early" % (port.encode(), port.encode()))
    got = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
    print("EARLY=" + got.decode(errors="replace").replace("\r\n", " | "))
except Exception as e:
    print("EARLY=fail: %s" % type(e).__name__)
