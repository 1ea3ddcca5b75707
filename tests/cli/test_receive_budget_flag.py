"""``--receive-budget`` (or ``DFOS_RELAY_RECEIVE_BUDGET``) bounds the bytes
of request bodies a relay run as ``dfos-relay serve`` receives at once: a
body declared over what is left beside the bodies arriving is answered 503
at once. A budget below the
largest body cap stops start-up with one line naming where it came from."""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping

import httpx
import pytest

from relay.cli import build_parser
from relay.config import DEFAULT_RECEIVE_BUDGET_BYTES
from relay.receive_budget import SMALL_BODY_BYTES
from relay.settings import ServeSettings, SettingsError, load_settings, parse_settings

from .conftest import RelayProcess

CAP = 2 * SMALL_BODY_BYTES  # bodies this large may be refused (smaller ones never are)
CAPS = [
    arg
    for name in ("--max-body-bytes", "--max-blob-bytes", "--sync-max-message-bytes")
    for arg in (name, str(CAP))
]
BUDGET = 2 * CAP
BODY = b"{}" + b" " * (SMALL_BODY_BYTES + 1)  # no operations body: read, then a 400


def hold_a_body(port: int) -> socket.socket:
    """A POST /operations at the cap, sent but for its last byte."""
    sock = socket.create_connection(("127.0.0.1", port))
    head = b"POST /operations HTTP/1.1\r\nHost: relay\r\nContent-Length: %d\r\n\r\n" % CAP
    sock.sendall(head + b" " * (CAP - 1))
    return sock


def answer_once(client: httpx.Client, status: int) -> httpx.Response:
    """A POST /operations over the never-refused size, tried until it is
    answered ``status``."""
    for _ in range(100):
        response = client.post("/operations", content=BODY)
        if response.status_code == status:
            return response
        time.sleep(0.05)
    raise AssertionError(f"never answered {status}: {response.status_code} {response.text}")


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--store", "memory://", *CAPS, "--receive-budget", str(BUDGET)], {}),
        (["--store", "memory://", *CAPS], {"DFOS_RELAY_RECEIVE_BUDGET": str(BUDGET)}),
    ],
    ids=["flag", "environment"],
)
def test_the_receive_budget_bounds_bodies_arriving_at_once(
    args: list[str], env: Mapping[str, str]
) -> None:
    relay = RelayProcess(args, env=env)
    held = [hold_a_body(relay.port) for _ in range(2)]
    try:
        with relay.explained(), httpx.Client(base_url=relay.url, timeout=30) as client:
            refused = answer_once(client, 503)  # once the held bodies are read
            assert refused.headers["retry-after"] == "1"
            assert "request bodies being received" in refused.json()["error"]
            for sock in held:  # hung up: their bytes are given back
                sock.close()
            answer_once(client, 400)  # {} is no operations body, and is read
    finally:
        for sock in held:
            sock.close()
        relay.stop()


def test_the_default_budget_holds_four_blobs_at_the_cap() -> None:
    settings = ServeSettings()
    assert settings.relay_config().receive_budget_bytes == DEFAULT_RECEIVE_BUDGET_BYTES
    assert 4 * settings.max_blob_bytes == DEFAULT_RECEIVE_BUDGET_BYTES
    budget = parse_settings({"DFOS_RELAY_RECEIVE_BUDGET": "20000000"})
    assert budget.relay_config().receive_budget_bytes == 20_000_000


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--receive-budget", "1000"], {}, "--receive-budget"),
        ([], {"DFOS_RELAY_RECEIVE_BUDGET": "1000"}, "DFOS_RELAY_RECEIVE_BUDGET"),
        (["--max-blob-bytes", str(DEFAULT_RECEIVE_BUDGET_BYTES + 1)], {}, "--receive-budget"),
        (
            ["--sync-max-message-bytes", str(DEFAULT_RECEIVE_BUDGET_BYTES + 1)],
            {},
            "--receive-budget (default",
        ),
    ],
    ids=["flag", "environment", "default-below-a-raised-blob-cap", "below-the-sync-cap"],
)
def test_a_budget_below_a_body_cap_is_refused(
    args: list[str], env: Mapping[str, str], named: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(build_parser().parse_args(["serve", *args]), env)
    assert str(refused.value).startswith(f"{named}")
    assert "at least the largest body cap" in str(refused.value)


def test_a_budget_given_without_sources_is_named_by_its_variable() -> None:
    with pytest.raises(SettingsError, match=r"^DFOS_RELAY_RECEIVE_BUDGET: "):
        parse_settings({"DFOS_RELAY_RECEIVE_BUDGET": "1000"})
