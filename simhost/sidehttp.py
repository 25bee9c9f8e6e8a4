"""The HTTP handler simhost's side-service doubles share (the LMCache server, the Mooncake
master): a body sent with its length, and no access log (scrapes are not news)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


class SideServiceHandler(BaseHTTPRequestHandler):
    def answer(self, status: int, kind: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return
