"""Our image/robots HTTP client against httpx on the same recorded responses (issue 24 §9).

`ingest/http.py` is kept (faster than httpx on loopback) only if it reads what
httpx reads. Each case is the raw bytes of one HTTP/1.1 response, replayed by a loopback
socket server; both clients fetch it, and the test asserts the same status, `Location`
and decoded body, or the same class of failure (`protocol`: a broken or lying framing;
`encoding`: a body whose Content-Encoding cannot be decoded). It found that raw deflate
(no zlib wrapper), which httpx and the crawl decode, was refused by the client; both now
use `bounded.BoundedDecoder`.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib

import httpx
import pytest
from raw_server import Recorded, raw_serve

from lookbench_live.ingest.http import (
    BadEncoding,
    BodyTooLarge,
    HttpClient,
    ProtocolFailure,
    read_body,
)

BODY = b"lookbench " * 400  # compressible, several KiB
CAP = 1_000_000  # far above every body: this compares parsing, not our caps


def head(status: str, *headers: str) -> bytes:
    return ("HTTP/1.1 " + status + "\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode()


def chunked(data: bytes, size: int = 700) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(data[i : i + size]), data[i : i + size]) for i in range(0, len(data), size)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-15)
    return compressor.compress(data) + compressor.flush()


CASES: dict[str, Recorded] = {
    "/plain": Recorded(head("200 OK", f"Content-Length: {len(BODY)}") + BODY),
    "/chunked": Recorded(head("200 OK", "Transfer-Encoding: chunked") + chunked(BODY)),
    "/chunked-ext": Recorded(
        head("200 OK", "Transfer-Encoding: chunked") + b"5;name=value\r\nhello\r\n0\r\nX-Trailer: 1\r\n\r\n"
    ),
    "/gzip": Recorded(
        head("200 OK", "Content-Encoding: gzip", f"Content-Length: {len(gzip.compress(BODY))}")
        + gzip.compress(BODY)
    ),
    "/gzip-chunked": Recorded(
        head("200 OK", "Content-Encoding: gzip", "Transfer-Encoding: chunked") + chunked(gzip.compress(BODY))
    ),
    "/deflate": Recorded(
        head("200 OK", "Content-Encoding: deflate", f"Content-Length: {len(zlib.compress(BODY))}")
        + zlib.compress(BODY)
    ),
    "/deflate-raw": Recorded(
        head("200 OK", "Content-Encoding: deflate", f"Content-Length: {len(raw_deflate(BODY))}")
        + raw_deflate(BODY)
    ),
    "/corrupt-gzip": Recorded(
        head("200 OK", "Content-Encoding: gzip", "Content-Length: 20") + b"\x1f\x8b\x08\x00" + b"\x00" * 16
    ),
    "/redirect": Recorded(head("302 Found", "Location: /plain", "Content-Length: 0")),
    "/not-found": Recorded(head("404 Not Found", "Content-Length: 9") + b"not found"),
    "/empty": Recorded(head("204 No Content")),
    "/close-delimited": Recorded(head("200 OK", "Connection: close") + BODY, close=True),
    "/truncated": Recorded(head("200 OK", f"Content-Length: {len(BODY) + 100}") + BODY, close=True),
    "/truncated-chunk": Recorded(
        head("200 OK", "Transfer-Encoding: chunked") + b"400\r\n" + BODY[:100], close=True
    ),
    "/bad-length": Recorded(head("200 OK", "Content-Length: abc") + BODY, close=True),
    "/negative-length": Recorded(head("200 OK", "Content-Length: -5") + BODY, close=True),
    "/oversized-length": Recorded(head("200 OK", "Content-Length: 99999999999999999999") + BODY, close=True),
    "/bad-chunk-size": Recorded(
        head("200 OK", "Transfer-Encoding: chunked") + b"zz\r\nhello\r\n0\r\n\r\n", close=True
    ),
}


Outcome = tuple[str, int | None, str | None, bytes | None]


async def ours(url: str) -> Outcome:
    client = HttpClient(user_agent="t/1")
    try:
        async with asyncio.timeout(10):
            async with client.get(url, allow_private=True) as response:
                location = response.redirect_target()
                return "ok", response.status, location, await read_body(response, CAP)
    except ProtocolFailure:
        return "protocol", None, None, None
    except BadEncoding:
        return "encoding", None, None, None
    except BodyTooLarge:
        return "too_large", None, None, None
    finally:
        await client.aclose()


async def theirs(url: str) -> Outcome:
    async with httpx.AsyncClient(timeout=10, trust_env=False) as client:
        try:
            response = await client.get(url)
        except httpx.DecodingError:
            return "encoding", None, None, None
        except (httpx.RemoteProtocolError, httpx.LocalProtocolError, httpx.ReadError):
            return "protocol", None, None, None
        location = None
        if response.is_redirect:
            location = str(response.request.url.join(response.headers["location"]))
        return "ok", response.status_code, location, response.content


# Where we are stricter on purpose: a declared length over the cap is refused before a byte
# of the body is read (httpx reads on and then finds the body short).
STRICTER = {"/oversized-length": "too_large"}


@pytest.mark.parametrize("path", sorted(CASES))
def test_our_client_reads_what_httpx_reads(path: str) -> None:
    with raw_serve(CASES) as server:
        url = server.base + path
        ours_seen = asyncio.run(ours(url))
        theirs_seen = asyncio.run(theirs(url))
    if path in STRICTER:
        assert ours_seen[0] == STRICTER[path] and theirs_seen[0] != "ok"
    else:
        assert ours_seen == theirs_seen


def test_both_clients_reuse_one_connection_for_keep_alive_responses() -> None:
    with raw_serve(CASES) as server:

        async def ours_twice() -> list[bytes]:
            client = HttpClient(user_agent="t/1")
            try:
                out = []
                for path in ("/plain", "/chunked", "/gzip"):
                    async with client.get(server.base + path, allow_private=True) as response:
                        out.append(await read_body(response, CAP))
                return out
            finally:
                await client.aclose()

        assert asyncio.run(ours_twice()) == [BODY, BODY, BODY]
        ours_connections = server.connections

        async def theirs_twice() -> list[bytes]:
            async with httpx.AsyncClient(trust_env=False) as client:
                return [(await client.get(server.base + p)).content for p in ("/plain", "/chunked", "/gzip")]

        assert asyncio.run(theirs_twice()) == [BODY, BODY, BODY]
        theirs_connections = server.connections - ours_connections
    assert ours_connections == theirs_connections == 1
