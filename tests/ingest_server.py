"""A scriptable HTTP server on 127.0.0.1 for the ingestion and address-guard tests.

Routes map a path to a `Route`: a status, headers and body, or a behaviour that real
servers exhibit when they misbehave (stalls, slow drip, endless chunked bodies). Every
behaviour is bounded in time so a broken client cannot hang the test run.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    # "stall_before_headers" | "stall_after_headers" | "slow_drip" | "endless_chunked" | "reset"
    behaviour: str | None = None
    fail_first: int = 0  # answer `fail_status` this many times before the real response
    fail_status: int = 503
    fail_headers: dict[str, str] = field(default_factory=dict)  # e.g. Retry-After
    delay: float = 0.0  # seconds to wait before answering


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        server = self.server
        with server.lock:
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            self._get()
        finally:
            with server.lock:
                server.in_flight -= 1

    def _get(self) -> None:
        server = self.server
        path = self.path.split("?", 1)[0]
        with server.lock:
            server.hits[path] += 1
            server.times.setdefault(path, []).append(time.monotonic())
            hit = server.hits[path]
            server.host_headers.append(self.headers.get("Host", ""))
            server.user_agents.append(self.headers.get("User-Agent", ""))
        route = server.routes.get(path)
        if route is None:
            self._send(404, b"not found", {"Content-Type": "text/plain"})
            return
        if hit <= route.fail_first:
            self._send(route.fail_status, b"busy", {"Content-Type": "text/plain", **route.fail_headers})
            return
        if route.delay:
            time.sleep(route.delay)
        behaviour = route.behaviour
        deadline = time.monotonic() + server.max_stall
        if behaviour == "stall_before_headers":
            while time.monotonic() < deadline and not server.stopping.is_set():
                time.sleep(0.05)
            return
        if behaviour == "reset":
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"x" * 100)
            self.close_connection = True
            return
        if behaviour in ("stall_after_headers", "slow_drip", "endless_chunked"):
            self.send_response(route.status)
            for key, value in route.headers.items():
                self.send_header(key, value)
            if behaviour in ("endless_chunked", "slow_drip"):
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", "10000000")
            self.end_headers()
            try:
                while time.monotonic() < deadline and not server.stopping.is_set():
                    if behaviour == "stall_after_headers":
                        time.sleep(0.05)
                    elif behaviour == "slow_drip":
                        self.wfile.write(b"1\r\nx\r\n")
                        self.wfile.flush()
                        time.sleep(0.1)
                    else:
                        chunk = b"\xff" * 65536
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                pass
            self.close_connection = True
            return
        headers = {"Content-Type": "application/octet-stream", **route.headers}
        self._send(route.status, route.body, headers)

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, routes: dict[str, Route], max_stall: float):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = routes
        self.max_stall = max_stall
        self.hits: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}  # monotonic arrival time of every request, per path
        self.host_headers: list[str] = []
        self.user_agents: list[str] = []
        self.in_flight = 0  # requests being answered now, and the most at once
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def serve(routes: dict[str, Route], max_stall: float = 8.0) -> Iterator[_Server]:
    """Serve `routes` on 127.0.0.1 (an ephemeral port) for the duration of the block."""
    server = _Server(routes, max_stall)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
