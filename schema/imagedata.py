"""Why an image's bytes do not decode, decided by what the decoder did, not by its message.

Pillow reports a truncated file as a plain `OSError`, like a corrupt one; only the message
differs. `decoder_ran_out` decodes the bytes again through a reader that notes when the decoder
asked for bytes past the end: that is what a truncated file is. Ingest's validator (reason
`truncated`) and the known-dataset hashing (`truncated image file`) ask it after a decode fails.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from PIL import Image


class _EndTracking(io.BytesIO):
    """Bytes for Pillow that note a read asking for more than is left (an empty answer)."""

    ran_out = False

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if not chunk and size != 0:
            self.ran_out = True
        return chunk


def decoder_ran_out(data: bytes, formats: Sequence[str] | None = None) -> bool:
    """Whether decoding `data` fails because the decoder needed bytes past its end (a truncated
    file). False when it decodes, or fails on what it read (corrupt data, a bad header)."""
    reader = _EndTracking(data)
    try:
        with Image.open(reader, formats=list(formats) if formats else None) as image:
            reader.ran_out = False  # the header was read whole; the question is the pixel data
            image.load()
    except Exception:  # any failure of the decode: what matters is whether it ran out of bytes
        return reader.ran_out
    return False
