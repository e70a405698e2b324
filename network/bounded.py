"""Response bodies read with a bound on what they inflate to (C16, S3).

httpx decodes `Content-Encoding` for `iter_bytes()` one network chunk at a time with no
output bound, and stacks decoders for `gzip, gzip, …`: a 64 KiB chunk of a gzip bomb becomes
some 64 MiB, and each stacked layer multiplies that again. The helpers here read the raw
(still encoded) bytes, at most `limit` of them, and inflate each layer with zlib's
`max_length`, so no layer ever produces more than `limit + 1` bytes.

Only `identity`, `gzip`, `x-gzip` and `deflate` are decoded (requests say so in
`ACCEPT_ENCODING`), at most `MAX_LAYERS` of them; anything else is refused.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import httpx

ACCEPT_ENCODING = "gzip, deflate"
MAX_LAYERS = 2


class BodyTooLarge(Exception):
    """The body (raw or inflated) is over the cap, or its encoding cannot be decoded safely.

    `reason` is the machine-readable code to record: `max_size` or `unsupported_encoding`."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _encodings(response: httpx.Response) -> list[str]:
    header = response.headers.get("content-encoding", "")
    layers = [e.strip().lower() for e in header.split(",") if e.strip()]
    layers = [e for e in layers if e != "identity"]
    if len(layers) > MAX_LAYERS:
        raise BodyTooLarge("unsupported_encoding", f"{len(layers)} stacked content encodings ({header})")
    unknown = [e for e in layers if e not in ("gzip", "x-gzip", "deflate")]
    if unknown:
        raise BodyTooLarge("unsupported_encoding", f"content encoding {unknown[0]!r} is not accepted")
    return layers


class BoundedDecoder:
    """One content-encoding layer inflated as it streams in, never more than asked for.

    The one decoding rule for every fetcher (the crawl's robots.txt and sitemaps here, the
    image client's `read_body`): gzip needs its header; deflate is the zlib wrapper, else
    raw deflate as some servers send it (httpx accepts both, so must we). `feed(data, room)`
    returns at most `room + 1` bytes, so a caller sees "over the cap" without inflating more.
    A corrupt stream raises `BodyTooLarge("unsupported_encoding")`.
    """

    def __init__(self, encoding: str):
        self.encoding = encoding
        self._candidates = [31] if encoding in ("gzip", "x-gzip") else [15, -15]
        self._decoder = zlib.decompressobj(self._candidates.pop(0))
        self._produced = False  # once output came, no fallback to another framing

    @property
    def pending(self) -> bool:
        """Input left over after the last `feed` stopped at its bound."""
        return bool(self._decoder.unconsumed_tail)

    def feed(self, data: bytes, room: int) -> bytes:
        out = bytearray()
        while data:
            try:
                piece = self._decoder.decompress(data, room + 1 - len(out))
            except zlib.error as exc:
                if self._produced or not self._candidates:
                    raise BodyTooLarge(
                        "unsupported_encoding", f"corrupt {self.encoding} body ({exc})"
                    ) from exc
                self._decoder = zlib.decompressobj(self._candidates.pop(0))
                continue
            if piece:
                self._produced = True
            out += piece
            if len(out) > room:
                break
            data = self._decoder.unconsumed_tail
        return bytes(out)


def inflate(data: bytes, encoding: str, limit: int) -> bytes:
    """One layer decoded, raising `BodyTooLarge` once the output would pass `limit` bytes."""
    decoder = BoundedDecoder(encoding)
    out = decoder.feed(data, limit)
    if len(out) > limit or decoder.pending:
        raise BodyTooLarge("max_size", f"the {encoding} body inflates past {limit} bytes")
    return out


def decode_layers(raw: bytes, layers: list[str], limit: int) -> bytes:
    body = raw
    for encoding in reversed(layers):  # the last-applied encoding is listed last
        body = inflate(body, encoding, limit)
    return body


def read_bounded(response: httpx.Response, limit: int, *, truncate: bool = False) -> bytes:
    """The decoded body of a streamed sync response, at most `limit` bytes.

    `truncate=True` keeps the first `limit` decoded bytes instead of refusing (robots.txt:
    RFC 9309 §2.5 asks to parse at least 500 KiB and ignore the rest)."""
    layers = _encodings(response)
    raw = _take_raw(response.iter_raw(), limit, truncate)
    return _finish(raw, layers, limit, truncate)


async def aread_bounded(response: httpx.Response, limit: int, *, truncate: bool = False) -> bytes:
    """`read_bounded` for a streamed async response."""
    layers = _encodings(response)
    out = bytearray()
    keep_prefix = truncate
    async for chunk in response.aiter_raw():
        out += chunk
        if len(out) > limit:
            if keep_prefix:
                break
            raise BodyTooLarge("max_size", f"more than {limit} bytes on the wire")
    return _finish(bytes(out), layers, limit, truncate)


def _take_raw(chunks: Iterator[bytes], limit: int, keep_prefix: bool) -> bytes:
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) > limit:
            if keep_prefix:
                break
            raise BodyTooLarge("max_size", f"more than {limit} bytes on the wire")
    return bytes(out)


def _finish(raw: bytes, layers: list[str], limit: int, truncate: bool) -> bytes:
    if not layers:
        return raw[:limit]
    if not truncate:
        return decode_layers(raw, layers, limit)
    # Keep the first `limit` inflated bytes: inflate with the bound, keep what came out.
    body = raw
    for encoding in reversed(layers):
        body = BoundedDecoder(encoding).feed(body, limit)[:limit]
    return body
