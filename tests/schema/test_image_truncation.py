"""A truncated image is told from a corrupt one by what the decoder did (it asked for bytes past the
end), not by Pillow's message (issue 26 §1): ingest's `truncated` and the known-dataset hashing's
"truncated image file" both rest on it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from lookbench_live.dedup.known import hash_files
from lookbench_live.schema.imagedata import decoder_ran_out


def _encoded(fmt: str) -> bytes:
    image = Image.radial_gradient("L").convert("RGB").resize((300, 200))
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_a_cut_file_ran_out_and_a_whole_one_did_not(fmt: str) -> None:
    data = _encoded(fmt)
    assert not decoder_ran_out(data)
    assert decoder_ran_out(data[: len(data) // 2])


def test_corrupt_pixel_data_is_not_truncation() -> None:
    data = bytearray(_encoded("PNG"))
    start = data.index(b"IDAT") + 8
    data[start : start + 200] = b"\xff" * 200  # the compressed stream is damaged, not cut
    assert not decoder_ran_out(bytes(data))


def test_known_hashing_names_a_truncated_file(tmp_path: Path) -> None:
    data = _encoded("JPEG")
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) // 2])
    (tmp_path / "whole.jpg").write_bytes(data)
    hashed = hash_files([tmp_path])
    reasons = {Path(path).name: reason for path, reason in hashed.failures}
    assert reasons == {"cut.jpg": "truncated image file"}
