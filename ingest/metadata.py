"""Strip metadata (EXIF with GPS, XMP, comments, text chunks) from image bytes, losslessly.

Stored images never carry a photographer's GPS position or text a page author put in them
(reliability I10). Only container segments are dropped; the compressed pixel data is copied
byte for byte, so hashes of the decoded image do not change. What a decoder needs stays: JPEG
JFIF (APP0), ICC profiles (APP2) and Adobe colour transforms (APP14); PNG and WebP image and
colour chunks.
"""

from __future__ import annotations

import struct

JPEG_DROP = {0xE1, *range(0xE3, 0xEE), 0xEF, 0xFE}  # APP1 (EXIF/XMP), APP3–APP13, APP15, COM
PNG_DROP = {b"tEXt", b"zTXt", b"iTXt", b"eXIf", b"tIME"}
WEBP_DROP = {b"EXIF", b"XMP "}


class MetadataError(ValueError):
    """The container is malformed; the message names the fault."""


def strip_metadata(data: bytes, image_format: str) -> bytes:
    """`data` without metadata segments; unknown formats are returned unchanged."""
    fmt = image_format.upper()
    if fmt == "JPEG":
        return _strip_jpeg(data)
    if fmt == "PNG":
        return _strip_png(data)
    if fmt == "WEBP":
        return _strip_webp(data)
    return data


def _strip_jpeg(data: bytes) -> bytes:
    if data[:2] != b"\xff\xd8":
        raise MetadataError("JPEG does not start with SOI")
    out = bytearray(b"\xff\xd8")
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            raise MetadataError(f"JPEG marker expected at byte {pos}")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0xDA or 0xD0 <= marker <= 0xD9:
            out += data[pos:]  # start of scan: the entropy-coded data and the rest, unchanged
            return bytes(out)
        (length,) = struct.unpack(">H", data[pos + 2 : pos + 4])
        end = pos + 2 + length
        if length < 2 or end > len(data):
            raise MetadataError(f"JPEG segment 0x{marker:02X} at byte {pos} runs past the end")
        if marker not in JPEG_DROP:
            out += data[pos:end]
        pos = end
    raise MetadataError("JPEG has no image data")


def _strip_png(data: bytes) -> bytes:
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise MetadataError("PNG signature missing")
    out = bytearray(data[:8])
    pos = 8
    while pos + 12 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        end = pos + 12 + length
        if end > len(data):
            raise MetadataError(f"PNG chunk {kind!r} at byte {pos} runs past the end")
        if kind not in PNG_DROP:
            out += data[pos:end]
        pos = end
        if kind == b"IEND":
            return bytes(out)
    raise MetadataError("PNG has no IEND chunk")


def _strip_webp(data: bytes) -> bytes:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        raise MetadataError("WebP RIFF header missing")
    body = bytearray()
    pos = 12
    while pos + 8 <= len(data):
        kind = data[pos : pos + 4]
        (size,) = struct.unpack("<I", data[pos + 4 : pos + 8])
        end = pos + 8 + size + (size & 1)
        if pos + 8 + size > len(data):
            raise MetadataError(f"WebP chunk {kind!r} at byte {pos} runs past the end")
        chunk = bytearray(data[pos:end])
        if kind == b"VP8X":
            chunk[8] &= ~0x0C & 0xFF  # clear the EXIF (0x08) and XMP (0x04) flags
        if kind not in WEBP_DROP:
            body += chunk
        pos = end
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + bytes(body)
