"""The replication ledger of the memory store (``stores.base.LinkLedgerStore``)."""

from __future__ import annotations

from dataclasses import replace

from stores.base import LinkDirection, LinkRecord, OutMark
from stores.links import bounded, dump_diagnostics, load_diagnostics


class MemoryLinks:
    def __init__(self) -> None:
        self._links: dict[tuple[str, str, str], LinkRecord] = {}
        self._marks: dict[tuple[str, str, str], OutMark] = {}  # (peer, scope, writer)

    async def get_link(
        self, peer_url: str, scope_id: str, direction: LinkDirection
    ) -> LinkRecord | None:
        return self._links.get((peer_url, scope_id, direction))

    async def put_link(self, record: LinkRecord, operator: bool = False) -> None:
        # a copy of the diagnostics: the caller's dict stays the caller's
        copy = load_diagnostics(dump_diagnostics(record.diagnostics))
        stored = self._links.get(record.key)
        state = record.state
        if not operator and stored is not None and "paused" in (stored.state, state):
            state = stored.state  # only an operator pauses or resumes
        self._links[record.key] = replace(bounded(record), state=state, diagnostics=copy)

    async def list_links(self) -> list[LinkRecord]:
        return [self._links[key] for key in sorted(self._links)]

    async def delete_link(self, peer_url: str, scope_id: str, direction: LinkDirection) -> bool:
        return self._links.pop((peer_url, scope_id, direction), None) is not None

    async def put_out_mark(self, mark: OutMark) -> None:
        r = mark.record
        record = replace(bounded(r), direction="out", diagnostics={}, remote_head=None)
        self._marks[(r.peer_url, r.scope_id, mark.writer)] = OutMark(mark.writer, record)

    async def list_out_marks(self) -> list[OutMark]:
        return [self._marks[key] for key in sorted(self._marks)]

    async def delete_out_mark(
        self, writer: str, peer_url: str, scope_id: str, updated_ms: int | None = None
    ) -> bool:
        key = (peer_url, scope_id, writer)
        mark = self._marks.get(key)
        if mark is None or (updated_ms is not None and mark.record.updated_ms != updated_ms):
            return False
        del self._marks[key]
        return True
