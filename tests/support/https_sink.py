"""An HTTPS peer for dawnpost's TLS tests, with a certificate a CA made here signed (trustme).

Usage: python3 https_sink.py PORT CA_OUT DATA_FILE

Writes the CA certificate to CA_OUT. GET answers DATA_FILE's contents as JSON (an http
source); POST reads the body and answers 200 (a webhook receiver). Prints READY once listening;
stops when stdin closes.
"""
import http.server
import ssl
import sys
import threading

import trustme


def main():
    port, ca_out, data_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    ca = trustme.CA()
    ca.cert_pem.write_to_path(ca_out)
    cert = ca.issue_cert("127.0.0.1", "localhost")
    with open(data_file, "rb") as f:
        data = f.read()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            n = int(self.headers.get("content-length", "0"))
            self.rfile.read(n)
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("READY", flush=True)
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
