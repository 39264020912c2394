# egress_upstream.py — the upstreams of test_egress: a test CA, and an HTTPS
# and a plain HTTP server on 127.0.0.1 (ephemeral ports) answering
# "hello from HOST path PATH" (and N bytes for /bytes/N). Writes "HTTPS_PORT HTTP_PORT\n" to argv[2]
# when ready; serves until its stdin closes (it dies with the test).
import http.server, os, ssl, subprocess, sys, threading

d = sys.argv[1]
def run(*a):
    subprocess.run(a, check=True, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
    "-days", "2", "-subj", "/CN=brig egress test CA")
run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
    "-subj", "/CN=allowed.brig.test")
with open(os.path.join(d, "ext"), "w") as f:
    f.write("subjectAltName=DNS:allowed.brig.test,DNS:denied.brig.test,DNS:later.brig.test,"
            "DNS:secret.brig.test,DNS:other.brig.test\n")
run("openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
    "-out", "srv.pem", "-days", "2", "-extfile", "ext")

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    # test_egress_secret's upstream view: what arrived is written to DIR/seen
    # (on the host; the sandbox gets only "recorded", never the headers back).
    def record(self, body=b""):
        with open(os.path.join(d, "seen"), "a") as f:
            f.write("%s\n%s\nbody=%s\n--\n" % (self.requestline, "".join("%s: %s\n" % kv for kv in self.headers.items()),
                                                 body.decode(errors="replace")))
        b = b"recorded\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.record(self.rfile.read(n) if n else b"")
    # A careless upstream: the request's headers back in the body (as error
    # pages, CORS preflights and TRACE do).
    def echo(self):
        b = ("%s\n%s" % (self.requestline, "".join("%s: %s\n" % kv for kv in self.headers.items()))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_TRACE(self):
        self.echo()
    def do_GET(self):
        if self.path == "/headers":
            return self.record()
        if self.path == "/echo":
            return self.echo()
        if self.path.startswith("/bytes/"):  # the benchmark's download
            n = int(self.path[7:])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[: min(n, len(chunk))])
                n -= min(n, len(chunk))
            return
        b = ("hello from %s path %s\n" % (self.headers.get("Host"), self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass

https = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(os.path.join(d, "srv.pem"), os.path.join(d, "srv.key"))
https.socket = ctx.wrap_socket(https.socket, server_side=True)
plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
for s in (https, plain):
    threading.Thread(target=s.serve_forever, daemon=True).start()
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write("%d %d\n" % (https.server_address[1], plain.server_address[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
sys.stdin.read()
