"""The ingest HTTP client (`ingest/http.py`): guard per request, pinned TLS, keep-alive."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess

import pytest
from ingest_server import Route, serve

from lookbench_live.ingest.http import HttpClient, read_body
from lookbench_live.network import netguard
from lookbench_live.network.netguard import BlockedURL


async def get(client: HttpClient, url: str, allow_private: bool = True) -> tuple[int, bytes]:
    async with client.get(url, allow_private=allow_private) as response:
        return response.status, await read_body(response, 10_000)


def test_loopback_is_refused_unless_allowed_and_connections_are_reused() -> None:
    with serve({"/a.jpg": Route(body=b"pixels"), "/b.jpg": Route(body=b"more")}) as server:

        async def go() -> None:
            client = HttpClient(user_agent="t/1")
            try:
                with pytest.raises(BlockedURL) as refused:
                    await get(client, f"{server.base}/a.jpg", allow_private=False)
                assert refused.value.reason == "blocked_address"
                assert await get(client, f"{server.base}/a.jpg") == (200, b"pixels")
                assert await get(client, f"{server.base}/b.jpg") == (200, b"more")
                assert sum(len(pool) for pool in client._idle.values()) == 1  # one socket, reused
            finally:
                await client.aclose()

        asyncio.run(go())
        assert server.hits["/a.jpg"] == 1  # the refused request never reached the server


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_connects_to_the_checked_address_and_verifies_the_name(tmp_path, monkeypatch) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=shop.test", "-addext", "subjectAltName=DNS:shop.test"],
        check=True, capture_output=True,
    )  # fmt: skip
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(netguard, "resolve", resolve)
    with serve({"/a.jpg": Route(body=b"pixels")}) as server:
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(cert, key)
        server.socket = server_context.wrap_socket(server.socket, server_side=True)
        port = server.server_address[1]

        async def go() -> None:
            client = HttpClient(user_agent="t/1", ssl_context=ssl.create_default_context(cafile=str(cert)))
            try:
                assert await get(client, f"https://shop.test:{port}/a.jpg") == (200, b"pixels")
                with pytest.raises(ssl.SSLCertVerificationError):
                    await get(client, f"https://other.test:{port}/a.jpg")
            finally:
                await client.aclose()

        asyncio.run(go())
        assert server.host_headers[0] == f"shop.test:{port}"
    assert asked == ["shop.test", "other.test"]  # each name resolved once, by the guard
