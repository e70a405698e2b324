"""A crawl's own crash-safe resume state (what Scrapy's JOBDIR does not promise under SIGKILL).

Scrapy's JOBDIR writes its queue state only on a clean close ("forced, sudden or otherwise
unclean shutdown can lead to data corruption", `jobs.rst`): after `kill -9` its seen-set can
hold requests its queue lost, and those pages are never fetched again. This journal is an
append-only log instead, written in this order for every page a callback finishes:

    pending  <request>   for each follow-up request the callback yielded
    item     <item>      for each item it yielded
    done     <fingerprint of the page's request>

Each line is flushed before the next step, so a killed process leaves a prefix of this log.
A rerun replays the logged items into the lake (idempotent by key), restarts from the pending
requests that have no `done`, and drops any request whose page is already `done`: nothing that
was finished is fetched again, and nothing that was not is lost. A torn last line is ignored.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lookbench_live.scrapers.items import CrawlItem

JOURNAL_NAME = "journal.jsonl"


class CrawlJournal:
    """The resume log of one crawl (one site, one run key) in `state_dir`."""

    def __init__(self, state_dir: str | os.PathLike[str]):
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        # Pickled Scrapy state and our journal may hold request data: private to the pipeline user.
        os.chmod(self.dir, 0o700)
        self.path = self.dir / JOURNAL_NAME
        self.started = False
        self.done: set[str] = set()
        self.pending: dict[str, dict[str, Any]] = {}
        self.items: list[dict[str, Any]] = []
        # Requests left for a later run by a budget (max_pages): the site's frontier.
        self.deferred: dict[str, dict[str, Any]] = {}
        self.pages = 0
        # The browser proxy's thread records its refusals here too (browser_guard.RefusalSink).
        self._lock = threading.Lock()
        self._batch: list[str] | None = None  # lines held by `together()`, for one thread
        self._batch_thread: int | None = None
        self._load()
        self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - open for the crawl's life

    def _load(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line torn by the kill
                kind = entry.get("t")
                if kind == "started":
                    self.started = True
                elif kind == "pending":
                    self.pending[entry["fp"]] = entry["request"]
                elif kind == "done":
                    self.done.add(entry["fp"])
                    self.pages += 1 if entry.get("page") else 0
                elif kind == "item":
                    self.items.append(entry["item"])
                elif kind == "deferred":
                    self.deferred[entry["fp"]] = entry["request"]

    def _write(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._batch is not None and threading.get_ident() == self._batch_thread:
                self._batch.append(line)
                return
            self._emit(line)

    def _emit(self, text: str) -> None:
        if self._handle.closed:
            return  # a late refusal after the crawl closed: the pipeline's last flush has it
        self._handle.write(text)
        self._handle.flush()

    @contextlib.contextmanager
    def together(self) -> Iterator[None]:
        """Entries of this thread inside the block go out as one write at its end, in order: a
        page's items, new requests and then its `done` (one syscall instead of one per entry;
        a kill tears at most the last line, and `done` is written last)."""
        with self._lock:
            self._batch, self._batch_thread = [], threading.get_ident()
        try:
            yield
        finally:
            with self._lock:
                lines, self._batch, self._batch_thread = self._batch or [], None, None
                if lines:
                    self._emit("".join(lines))

    def mark_started(self) -> None:
        self.started = True
        self._write({"t": "started"})

    def add_pending(self, fingerprint: str, request: dict[str, Any]) -> None:
        if fingerprint in self.pending or fingerprint in self.done:
            return
        self.pending[fingerprint] = request
        self._write({"t": "pending", "fp": fingerprint, "request": request})

    def add_deferred(self, fingerprint: str, request: dict[str, Any]) -> None:
        """A request over this run's page budget: not fetched now, handed to the next run."""
        if fingerprint in self.deferred or fingerprint in self.pending or fingerprint in self.done:
            return
        self.deferred[fingerprint] = request
        self._write({"t": "deferred", "fp": fingerprint, "request": request})

    def frontier(self) -> list[dict[str, Any]]:
        """What this run did not reach: deferred requests and pending ones never done."""
        out = [r for fp, r in self.deferred.items() if fp not in self.done and fp not in self.pending]
        return out + list(self.unfinished())

    def add_item(self, item: CrawlItem) -> None:
        self._write({"t": "item", "item": item.to_json()})

    def mark_done(self, fingerprint: str, *, page: bool) -> None:
        if fingerprint in self.done:
            return
        self.done.add(fingerprint)
        self.pages += 1 if page else 0
        self._write({"t": "done", "fp": fingerprint, "page": page})

    def unfinished(self) -> Iterator[dict[str, Any]]:
        """Requests logged as pending whose page is not done, in the order they were logged."""
        for fingerprint, request in self.pending.items():
            if fingerprint not in self.done:
                yield request

    def logged_items(self) -> Iterator[CrawlItem]:
        for value in self.items:
            yield CrawlItem.from_json(value)

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if not self._handle.closed:
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
