"""A loopback server that replays recorded HTTP/1.1 response bytes, exactly as given.

`http.server` normalises what it sends (it adds headers, frames bodies itself), so it cannot
serve a truncated chunk, a lying Content-Length or a hand-written chunked body. Here each
path maps to the raw bytes of one response; the server reads request heads on a
connection (keep-alive: many per connection), answers each with its path's bytes, and
closes the connection after a response marked `close`. It counts connections so a test
can see whether a client reused one.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Recorded:
    raw: bytes  # status line, headers, blank line and body, as sent on the wire
    close: bool = False  # close the connection after sending (a truncated body needs it)


class RawServer:
    def __init__(self, responses: dict[str, Recorded]):
        self.responses = responses
        self.connections = 0
        self.requests = 0
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5.0)
        buffer = b""
        with conn:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buffer:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                path = head.split(b"\r\n", 1)[0].split(b" ")[1].decode()
                with self._lock:
                    self.requests += 1
                recorded = self.responses.get(path.split("?", 1)[0])
                if recorded is None:
                    recorded = Recorded(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                try:
                    conn.sendall(recorded.raw)
                except OSError:
                    return
                if recorded.close:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_WR)
                    return

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()
        for thread in self._threads:
            thread.join(timeout=5)


@contextlib.contextmanager
def raw_serve(responses: dict[str, Recorded]) -> Iterator[RawServer]:
    server = RawServer(responses)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()
        thread.join(timeout=5)
