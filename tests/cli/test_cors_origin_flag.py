"""``--cors-origin`` (repeatable) and ``DFOS_RELAY_CORS_ORIGINS``
(comma-separated): browser origins allowed by CORS, off when none is named;
a bad origin stops start-up with one line naming the flag or variable."""

from __future__ import annotations

import httpx
import pytest

from relay.cli import build_parser
from relay.settings import SettingsError, load_settings, parse_settings

from .conftest import RelayProcess


def test_origins_from_flags_or_environment() -> None:
    args = build_parser().parse_args(
        ["serve", "--cors-origin", "https://a.example", "--cors-origin", "http://localhost:5173"]
    )
    env = {"DFOS_RELAY_CORS_ORIGINS": "https://ignored.example"}
    assert load_settings(args, env).cors_origins == ("https://a.example", "http://localhost:5173")
    from_env = parse_settings({"DFOS_RELAY_CORS_ORIGINS": "https://a.example, *,"})
    assert from_env.cors_origins == ("https://a.example", "*")
    assert from_env.relay_config().cors_origins == ("https://a.example", "*")
    assert parse_settings({}).cors_origins == ()  # off by default


@pytest.mark.parametrize(
    "origin",
    [
        "app.example",
        "ftp://app.example",
        "https://app.example/",
        "https://app.example/path",
        "https://app.example?x=1",
        "https://app.example#top",
        "https://user@app.example",
        "https://",
        "https://app.example:99999",
    ],
)
def test_bad_origins_are_refused(origin: str) -> None:
    with pytest.raises(SettingsError) as raised:
        parse_settings({"DFOS_RELAY_CORS_ORIGINS": origin})
    assert str(raised.value).startswith("DFOS_RELAY_CORS_ORIGINS: ")


def test_the_real_command_answers_a_preflight() -> None:
    relay = RelayProcess(["--store", "memory://", "--cors-origin", "https://app.example"])
    try:
        answer = httpx.options(
            relay.url + "/operations/status",
            headers={
                "origin": "https://app.example",
                "access-control-request-method": "POST",
            },
            timeout=5,
        )
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "https://app.example"
    finally:
        code, output = relay.stop()
    assert code == 0, output
