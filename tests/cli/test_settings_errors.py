"""Every bad option and environment value stops start-up with one line
naming the option, exit status 2; good values parse as documented."""

from __future__ import annotations

import subprocess

import pytest

from peer.base import PeerConfig
from relay.cli import main
from relay.limits import RateLimit
from relay.settings import OPTIONS, ServeSettings, load_settings, parse_peer, parse_settings

from .conftest import DFOS_RELAY, clean_env

BAD_VALUES = {
    "--host": "two words",
    "--port": "70000",
    "--store": "mysql://x",
    "--workers": "0",
    "--peer": "ftp://peer",
    "--sync-interval": "-1",
    "--max-body-bytes": "lots",
    "--max-blob-bytes": "-5",
    "--body-grace": "0",
    "--body-min-rate": "0",
    "--receive-budget": "0",
    "--max-pending": "0",
    "--max-copies-per-op": "a few",
    "--parse-queue": "0",
    "--verify-threads": "0",
    "--log-level": "loud",
    "--rate-limit": "10/fortnight",
    "--metrics-port": "99999",
    "--feed-replay-window": "0",
    "--feed-max-subscribers": "-3",
    "--feed-heartbeat": "0",
    "--feed-send-timeout": "soon",
    "--trusted-proxy": "10.0.0.300",
    "--cors-origin": "https://app.example/path",
    "--reconcile-interval": "often",
    "--reconcile-window": "a while",
    "--reconcile-full-every": "0",
    "--sync-frame-limit": "100",
    "--sync-max-message-bytes": "0",
    "--admin-did": "not-a-did",
    "--admin-token-max-lifetime": "0",
    "--purge-step-ops": "0",
    "--auth-token-max-lifetime": "-1",
    "--write-policy": "no_such_module_here:decide",
    "--write-policy-timeout": "0",
    "--write-policy-give-up": "-1",
    "--allow-did": "did:web:example.com",
    "--deny-did": "someone",
    "--allow-kind": "widget",
    "--deny-kind": "blob",
    "--scope": "did:dfos:nope",
    "--scope-file": "/no/such/scope-file.txt",
    "--fanout-direct-max": "many",
    "--peer-discovery-max": "-2",
    "--peer-discovery-per-host": "0",
    "--peer-refresh": "sometimes",
}
BAD_ENV = {
    **{opt.env: BAD_VALUES[opt.flag] for opt in OPTIONS if opt.flag in BAD_VALUES},
    "DFOS_RELAY_NO_CONTENT": "maybe",
    "DFOS_RELAY_NO_LOG": "perhaps",
    "DFOS_RELAY_PEER_DISCOVERY": "kind of",
}


def run_main(
    argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    code = main(["serve", *argv], env=env)
    return code, capsys.readouterr().err


def test_every_option_has_a_bad_value_case() -> None:
    assert {o.flag for o in OPTIONS if o.kind != "flag"} == set(BAD_VALUES)
    assert {o.env for o in OPTIONS} == set(BAD_ENV)


@pytest.mark.parametrize(("flag", "value"), sorted(BAD_VALUES.items()))
def test_bad_option_is_one_line_naming_it(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_main([flag, value], {}, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"dfos-relay serve: error: {flag}: ")


@pytest.mark.parametrize(("name", "value"), sorted(BAD_ENV.items()))
def test_bad_environment_value_is_one_line_naming_it(
    name: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run_main([], {name: value}, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"dfos-relay serve: error: {name}: ")


def test_memory_store_with_several_workers_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_main(["--store", "memory://", "--workers", "2"], {}, capsys)
    assert (code, err.count("\n")) == (2, 1) and "--workers" in err


def test_real_command_bad_values_exit_2_with_one_line() -> None:
    flag = subprocess.run(
        [DFOS_RELAY, "serve", "--port", "abc"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=30,
    )
    env = subprocess.run(
        [DFOS_RELAY, "serve"],
        capture_output=True,
        text=True,
        timeout=30,
        env=clean_env({"DFOS_RELAY_MAX_BODY_BYTES": "1e6"}),
    )
    unknown = subprocess.run(
        [DFOS_RELAY, "serve", "--bogus"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=30,
    )
    for proc, name in ((flag, "--port"), (env, "DFOS_RELAY_MAX_BODY_BYTES"), (unknown, "--bogus")):
        assert proc.returncode == 2
        assert proc.stderr.count("\n") == 1 and name in proc.stderr


def test_flags_win_over_environment_and_defaults_apply() -> None:
    from relay.cli import build_parser

    args = build_parser().parse_args(["serve", "--port", "5000", "--peer", "http://a:1#sync"])
    env = {
        "DFOS_RELAY_PORT": "6000",
        "DFOS_RELAY_STORE": "memory://",
        "DFOS_RELAY_PEERS": "http://b:2,http://c:3",
        "DFOS_RELAY_NO_LOG": "yes",
        "DFOS_RELAY_RATE_LIMIT": "60/m",
        "DFOS_RELAY_TRUSTED_PROXIES": "10.0.0.0/8, ::1",
        "DFOS_RELAY_SYNC_INTERVAL": "0",
    }
    s = load_settings(args, env)
    assert (s.port, s.store, s.log, s.content, s.sync_interval_s) == (
        5000,
        "memory://",
        False,
        True,
        None,
    )
    assert s.peers == (PeerConfig("http://a:1", gossip=False, read_through=False, sync=True),)
    assert s.rate_limit == RateLimit(rate=1.0, capacity=60.0)
    assert [str(n) for n in s.trusted_proxies] == ["10.0.0.0/8", "::1/128"]
    assert parse_settings({}) == ServeSettings()
    threads = parse_settings({"DFOS_RELAY_VERIFY_THREADS": "3"})
    assert threads.relay_config().verify_threads == 3
    buffer = parse_settings({"DFOS_RELAY_MAX_PENDING": "500", "DFOS_RELAY_MAX_COPIES_PER_OP": "0"})
    assert (buffer.relay_config().max_pending, buffer.relay_config().max_copies_per_op) == (500, 0)
    assert ServeSettings().relay_config().verify_threads is None  # one per core
    deadline = parse_settings({"DFOS_RELAY_BODY_GRACE": "2.5", "DFOS_RELAY_BODY_MIN_RATE": "64"})
    config, default = deadline.relay_config(), ServeSettings().relay_config()
    assert (config.body_grace_s, config.body_min_rate) == (2.5, 64)
    assert (default.body_grace_s, default.body_min_rate) == (10, 1024)


def test_peer_syntax() -> None:
    assert parse_peer("http://a:4444/") == PeerConfig("http://a:4444")
    assert parse_peer("http://a#read-through") == PeerConfig(
        "http://a", gossip=False, read_through=True, sync=False
    )
    assert parse_peer("http://a#gossip+sync").read_through is False
    for bad in ("http://a#", "http://a#push", "not a url"):
        with pytest.raises(ValueError):
            parse_peer(bad)
