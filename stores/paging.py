"""Cursor paging shared by every backend: the cursor is the last entry's CID
while more entries follow, and null once the reader has caught up."""

from __future__ import annotations

from collections.abc import Sequence

from stores.base import LogEntry, LogPage


def page_after(entries: Sequence[LogEntry], limit: int, *, has_more: bool) -> LogPage:
    """Build a page; ``has_more`` says whether entries exist past this page."""
    cursor = entries[-1].cid if entries and has_more and len(entries) >= limit else None
    return LogPage(tuple(entries), cursor)
