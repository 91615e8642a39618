"""The daemon's HTTP server: ``/metrics`` (Prometheus text) and ``/healthz`` (liveness).

``/metrics`` serves the registry, ``/healthz`` answers ``200 ok`` while every
supervised loop is alive and progressing and ``503`` with one line per loop that is
not (failing, stuck or dead, :mod:`coordinator.kernel.supervise`), as a liveness probe
expects. Any other path is ``404`` with a short index: the metrics are no longer served
at ``/`` (``prometheus_client.start_http_server`` answers every path with them).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from coordinator.kernel.supervise import LoopHealth, unhealthy

__all__ = ["HealthSource", "MetricsServer", "health_page"]

_log = logging.getLogger(__name__)

HealthSource = Callable[[], Sequence[LoopHealth]]
"""Returns the health of every supervised loop, read at each ``/healthz``."""

_INDEX: Final = b"ordered coordinator: /metrics (Prometheus), /healthz (liveness)\n"


def health_page(healths: Sequence[LoopHealth]) -> tuple[int, str]:
    """The ``/healthz`` status and body for ``healths``."""
    bad = unhealthy(healths)
    if not bad:
        return 200, "ok\n"
    lines = ["unhealthy"] + [h.describe() for h in bad]
    return 503, "\n".join(lines) + "\n"


class MetricsServer:
    """Serve ``registry`` and ``health`` over HTTP in a thread of its own.

    Args:
        address: ``(host, port)`` to bind (port 0: any free port).
        registry: What ``/metrics`` serves.
        health: What ``/healthz`` reports (default: nothing supervised, always ``ok``).

    Raises:
        OSError: The address cannot be bound.
    """

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        health: HealthSource | None = None,
    ) -> None:
        self.health: HealthSource = health or (lambda: ())
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, CONTENT_TYPE_LATEST, generate_latest(registry))
                elif path == "/healthz":
                    try:
                        status, body = health_page(server.health())
                    except Exception as exc:  # a probe must get an answer
                        _log.exception("healthz failed")
                        status, body = 503, f"unhealthy\nhealth check failed: {exc!r}\n"
                    self._reply(status, "text/plain; charset=utf-8", body.encode())
                else:
                    self._reply(404, "text/plain; charset=utf-8", _INDEX)

            def _reply(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return  # a scrape every few seconds is not news

        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET

        class Server(ThreadingHTTPServer):
            address_family = family
            daemon_threads = True

        self._server: Server | None = Server(address, Handler)
        bound = self._server.server_address
        self.address: tuple[str, int] = (str(bound[0]), int(bound[1]))
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
            self._thread.join(5.0)
