"""A recording HTTP proxy in front of the GCS emulator, run as its own process:
`python gcs_proxy.py <upstream URL> <log file>`. It prints its port, then forwards every
request and appends `[method, path, Authorization]` to the log, one JSON line each.
Redirections to the upstream (resumable upload URLs) are rewritten to the proxy, so that a
client stays behind it."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def main(upstream: str, log: str) -> None:
    client = httpx.Client(timeout=30)
    here = ""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                chunk = self.rfile.read(size)
                self.rfile.readline()
                if size == 0:
                    return body
                body += chunk

        def _forward(self) -> None:
            with open(log, "a") as out:
                record = [self.command, self.path, self.headers.get("Authorization")]
                out.write(json.dumps(record) + "\n")
            body = self._body()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            answer = client.request(
                self.command, upstream + self.path, headers=headers, content=body
            )
            data = answer.content
            self.send_response_only(answer.status_code)
            for name, value in answer.headers.items():
                if name.lower() in _HOP or name.lower() == "content-encoding":
                    continue
                self.send_header(name, value.replace(upstream, here))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    here = f"http://127.0.0.1:{server.server_address[1]}"
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
