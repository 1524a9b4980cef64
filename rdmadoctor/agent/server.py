"""/metrics and /healthz of `rdmadoctor agent`: a ThreadingHTTPServer in a daemon thread.

What it serves is rendered by :mod:`rdmadoctor.output.metrics`; this module only answers HTTP.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from rdmadoctor.output.metrics import render


class MetricsServer:
    """/metrics and /healthz on a ThreadingHTTPServer in a daemon thread.

    ``health()`` returns (ok, reason); /healthz answers 200 "ok" or 503 with the reason.
    """

    def __init__(self, address: str, port: int, registry, health: Callable[[], tuple[bool, str]]):
        import socket
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from prometheus_client import CONTENT_TYPE_LATEST

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    try:
                        body, ctype, code = render(registry), CONTENT_TYPE_LATEST, 200
                    except Exception as e:  # noqa: BLE001 - a scrape must not kill the server
                        body, ctype, code = f"metrics failed: {type(e).__name__}: {e}\n".encode(), "text/plain; charset=utf-8", 500
                elif path in ("/healthz", "/livez", "/readyz"):
                    ok, reason = health()
                    body, ctype, code = (reason + "\n").encode(), "text/plain; charset=utf-8", 200 if ok else 503
                elif path == "/":
                    body = b"rdmadoctor agent: /metrics /healthz\n"
                    ctype, code = "text/plain; charset=utf-8", 200
                else:
                    body, ctype, code = b"not found: try /metrics or /healthz\n", "text/plain; charset=utf-8", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_HEAD = do_GET

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - scrapes stay out of the log
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in address else socket.AF_INET

        self.httpd = Server((address, port), Handler)
        self.address, self.port = self.httpd.server_address[:2]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="metrics", daemon=True)

    def start(self) -> "MetricsServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
