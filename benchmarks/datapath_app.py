"""The application behind the sidecar's HTTP delivery in the data path benchmark.

    python -m benchmarks.datapath_app PORT

A trivial local service, as a user's would be at its simplest: HTTP/1.1 with keep-alive, one
thread per connection, reads each batch and parses its JSON (a real application has to), answers
204. It runs in its own process so that its CPU is not the sidecar's.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        json.loads(body)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
