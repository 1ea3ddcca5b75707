"""State snapshots round-trip through the durable stores' JSON columns
exactly, whatever the integers (orjson where it is exact, json beyond)."""

from __future__ import annotations

import pytest

from stores.sql.rows import dump_state, load_state


@pytest.mark.parametrize(
    "state",
    [
        {"did": "did:dfos:abc", "keys": [{"id": "k", "n": 1}], "deleted": False, "ms": 2**53},
        {"big": 2**64 - 1, "small": -(2**63)},
        {"bigger": 2**70, "negative": -(2**63) - 1},
        {"text": "caf\u00e9 \u2028 \U0001f600", "nested": {"a": [None, True, 0]}},
    ],
)
def test_state_round_trips_exactly(state: dict[str, object]) -> None:
    text = dump_state(state)
    assert text is not None
    back = load_state(text)
    assert back == state and repr(back) == repr(state)
