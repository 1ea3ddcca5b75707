"""The pieces around fan-out that need no mesh: a hostile well-known
``peers`` list is bounded and ignored with a log line, echo memory is
bounded per peer, discovery picks peers of peers within its bound, and the
serve flags reach ``PeeringConfig``."""

from __future__ import annotations

import logging

import pytest

from relay.cli import build_parser
from relay.peering.config import FANOUT_DIRECT_MAX, PeeringConfig
from relay.peering.directory import (
    MAX_ADVERTISED_PEERS,
    Advertised,
    PeerDirectory,
    parse_advertised,
)
from relay.peering.discovery import learn_peers
from relay.peering.echo import EchoMemory
from relay.settings import SettingsError, load_settings, parse_settings

PEER = "http://peer.test"


def test_advertised_peers_are_read_with_their_dids() -> None:
    value = [{"url": "http://a.test/", "did": "did:dfos:a"}, {"url": "https://b.test"}]
    assert parse_advertised(PEER, value) == (
        Advertised("http://a.test", "did:dfos:a"),
        Advertised("https://b.test", None),
    )
    assert parse_advertised(PEER, None) == ()  # an older relay: no 'peers'


def test_a_huge_list_is_cut_to_the_bound_with_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    value = [{"url": f"http://p{i}.test", "did": f"did:dfos:p{i}"} for i in range(100_000)]
    with caplog.at_level(logging.WARNING, "dfos_relay.peering"):
        parsed = parse_advertised(PEER, value)
    assert len(parsed) == MAX_ADVERTISED_PEERS
    assert "only the first" in caplog.text and PEER in caplog.text


@pytest.mark.parametrize(
    "bad",
    [
        "not a list",
        [{"url": "ftp://x.test"}],
        [{"url": "http://x.test?q=1"}],
        [{"url": 7}],
        [{"did": "did:dfos:x"}],
        [{"url": "http://x.test", "did": "not-a-did"}],
        [{"url": "http://x.test", "did": "did:" + "x" * 1000}],
        ["http://x.test"],
    ],
)  # fmt: skip
def test_bad_entries_are_skipped_and_logged(bad: object, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, "dfos_relay.peering"):
        assert parse_advertised(PEER, bad) == ()
    assert PEER in caplog.text


def test_echo_memory_is_bounded_per_peer_and_forgets_the_oldest() -> None:
    echo = EchoMemory(per_peer=3)
    echo.note("http://a.test", ["c1", "c2", "c3", "c4"])
    assert echo.size("http://a.test") == 3
    assert not echo.sent_us("http://a.test", "c1") and echo.sent_us("http://a.test", "c4")
    assert not echo.sent_us("http://b.test", "c4")  # per peer
    echo.note("http://a.test", ["c2", "c5"])  # c2 refreshed, so c3 goes
    assert echo.sent_us("http://a.test", "c2") and not echo.sent_us("http://a.test", "c3")


def _directory_with(advertised: dict[str, list[Advertised]]) -> PeerDirectory:
    directory = PeerDirectory(advertised, client=None)
    for i, (url, entries) in enumerate(advertised.items()):
        directory.add(url, f"did:dfos:configured{i}")
        directory._advertised[url] = tuple(entries)  # what its well-known said
    return directory


def test_discovery_learns_new_peers_by_did_never_itself_and_within_the_bound() -> None:
    me = "did:dfos:me"
    directory = _directory_with(
        {
            "http://c0.test": [
                Advertised("http://me.test", me),  # ourselves
                Advertised("http://c1.test", "did:dfos:configured1"),  # already a peer
                Advertised("http://x.test", None),  # no DID: cannot dedup it
                Advertised("http://n1.test", "did:dfos:n1"),
                Advertised("http://n1-alias.test", "did:dfos:n1"),  # same DID again
            ],
            "http://c1.test": [Advertised("http://n2.test", "did:dfos:n2")],
        }
    )
    learned = learn_peers(directory, list(directory.urls), me, room=10)
    assert [e.url for e in learned] == ["http://n1.test", "http://n2.test"]
    assert [e.url for e in learn_peers(directory, list(directory.urls), me, room=1)] == [
        "http://n1.test"
    ]
    assert learn_peers(directory, list(directory.urls), me, room=0) == []


def test_serve_flags_reach_the_peering_config() -> None:
    args = build_parser().parse_args(
        [
            "serve", "--fanout-direct-max", "1000", "--peer-discovery", "--peer-discovery-max", "8",
            "--peer-discovery-per-host", "2",
        ]
    )  # fmt: skip
    config = load_settings(args, {"DFOS_RELAY_PEER_REFRESH": "2m"}).peering_config()
    assert config.fanout_direct_max == 1000 and config.peer_discovery
    assert config.peer_discovery_max == 8 and config.directory_refresh_s == 120
    assert config.peer_discovery_per_host == 2
    default = parse_settings({}).peering_config()
    assert default.fanout_direct_max == FANOUT_DIRECT_MAX == PeeringConfig().fanout_direct_max
    assert not default.peer_discovery
    with pytest.raises(SettingsError, match="--fanout-direct-max"):
        load_settings(build_parser().parse_args(["serve", "--fanout-direct-max", "-1"]), {})
