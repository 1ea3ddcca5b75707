"""A peer's log page is checked before anything in it is used: its cursor
(and a scoped page's ``scannedTo``) is a log position the relay stores as
the peer's cursor and sends back, so one holding NUL (which a Postgres text
column cannot hold) or longer than any CID makes the page malformed."""

from __future__ import annotations

import pytest

from peer.base import MAX_POSITION_CHARS, PeerMalformedPage, parse_log_page

PEER = "http://peer.test"
CID = "bafyreiam6fb53r4irft77m34btq3ucipfeodbx2mirzifhzqmkk3u2zrnm"


def test_a_cid_cursor_and_scan_position_are_kept() -> None:
    page = parse_log_page(PEER, {"entries": [], "cursor": CID, "scannedTo": CID}, 10)
    assert (page.cursor, page.scanned_to) == (CID, CID)


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"cursor": CID + "\x00"}, id="cursor-nul"),
        pytest.param({"cursor": "b" * (MAX_POSITION_CHARS + 1)}, id="cursor-overlong"),
        pytest.param({"cursor": None, "scannedTo": "\x00"}, id="scanned-to-nul"),
    ],
)
def test_a_position_no_store_should_keep_makes_the_page_malformed(fields: dict) -> None:
    with pytest.raises(PeerMalformedPage):
        parse_log_page(PEER, {"entries": [], **fields}, 10)
