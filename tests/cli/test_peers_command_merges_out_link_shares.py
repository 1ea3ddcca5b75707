"""``dfos-relay peers`` shows an out-link merged over every process's share
of it (the workers of one relay, hosts on one database): the lowest
watermark and the worst state, gone shares included until a running
process clears them; a link with no shares as it was written."""

from __future__ import annotations

from pathlib import Path

from relay.cli.peers import read_links
from stores.base import FULL_SCOPE, LinkRecord, OutMark
from stores.sqlite import SqliteStore

URL = "https://peer.example"


async def test_an_out_link_is_shown_merged_over_its_shares(tmp_path: Path) -> None:
    path = tmp_path / "relay.db"
    store = SqliteStore(path)
    await store.open()
    try:
        for seq in range(9):
            await store.put_link(LinkRecord(f"{URL}/{seq}", FULL_SCOPE, "in"))  # noise
        await store.put_link(LinkRecord(URL, FULL_SCOPE, "out", "live", "9", "9"))  # last write
        await store.put_link(LinkRecord(URL, FULL_SCOPE, "in", "live", "e.4", "e.4"))
        await store.put_out_mark(OutMark("w1", LinkRecord(URL, FULL_SCOPE, "out", "live", "9",
                                                          "9", updated_ms=10)))  # fmt: skip
        await store.put_out_mark(OutMark("w2", LinkRecord(URL, FULL_SCOPE, "out", "repairing",
                                                          "6", "3", updated_ms=0)))  # fmt: skip
    finally:
        await store.close()
    views = {(v.record.peer_url, v.record.direction): v for v in
             await read_links(f"sqlite:///{path}", "--store")}  # fmt: skip
    out = views[(URL, "out")].record
    assert (out.state, out.applied_token, out.received_token) == ("repairing", "3", "9")
    assert views[(URL, "in")].record.applied_token == "e.4"
    assert views[(f"{URL}/0", "in")].record.state == "initial"
