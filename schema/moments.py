"""Time parsing: the one reader of the timestamps and dates the project writes and is given.

Manifests, lock files, crawl state, the CLI's `--as-of`/`--window`/`--after` and the crawl's
window all hold ISO 8601 text. `parse_moment` reads any of them as an aware datetime: a date is
its midnight, a naive value is UTC (every moment we write is UTC), an offset is kept. Bad text
raises `ValueError`; callers turn that into their own error (a CLI option, a refused lock).
"""

from __future__ import annotations

import datetime as dt


def parse_moment(value: str | dt.datetime | dt.date | None) -> dt.datetime | None:
    """An ISO 8601 date or datetime (`Z` or an offset allowed) as an aware datetime; a naive value
    is UTC; None or "" is None. Raises `ValueError` on anything else."""
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        moment = dt.datetime.fromisoformat(value.strip())
    else:
        raise ValueError(f"{value!r} is not a date or time")
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def parse_day(value: str) -> dt.date:
    """A calendar day `YYYY-MM-DD` (the `--after` of evaluation ranges); raises `ValueError`."""
    return dt.date.fromisoformat(value.strip())
