"""A relay publishes its peers' URLs (the well-known ``peers``, /metrics
labels, logs), so a peer URL carrying credentials is refused at start-up
(``--peer``, ``DFOS_RELAY_PEERS``, the library), without repeating them."""

from __future__ import annotations

import pytest

from relay import create_relay
from relay.settings import parse_peer

SECRET_URL = "http://alice:s3cret@peer.example:4444"


def test_the_peer_option_refuses_credentials() -> None:
    with pytest.raises(ValueError, match="credentials") as refused:
        parse_peer(SECRET_URL + "#gossip")
    assert "s3cret" not in str(refused.value) and "alice" not in str(refused.value)


def test_a_library_relay_refuses_them_too() -> None:
    with pytest.raises(ValueError, match="credentials") as refused:
        create_relay(peers=[SECRET_URL])
    assert "s3cret" not in str(refused.value)
