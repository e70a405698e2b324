"""O8: the crawl's JOBDIR (pickles: loading one runs code) is private to the pipeline user."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from lookbench_live.config import CrawlSettings, SiteSettings
from lookbench_live.scrapers.crawl import CrawlError, ensure_private_dir, run_crawl

SITE = SiteSettings(
    name="s", platform="schema_org", base_url="http://127.0.0.1:9/", allow_private_addresses=True
)


def test_a_new_state_folder_is_private(tmp_path: Path) -> None:
    folder = tmp_path / "state" / "a" / "b"
    ensure_private_dir(folder)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_folder_under_a_shared_writable_parent_is_refused_before_crawling(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # writable by everyone, no sticky bit: anyone could plant a JOBDIR
    with pytest.raises(CrawlError, match="other users may write"):
        run_crawl(SITE, CrawlSettings(), str(tmp_path / "lake"), "k", jobdir=str(shared / "job"))
    assert not (shared / "job" / "crawl.log").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="planting a folder of another user needs root")
def test_a_folder_planted_by_another_user_is_refused(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    os.chown(planted, 65534, 65534)
    with pytest.raises(CrawlError, match="belongs to uid 65534"):
        ensure_private_dir(planted)
