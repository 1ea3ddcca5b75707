"""``--body-grace`` and ``--body-min-rate`` (or ``DFOS_RELAY_BODY_GRACE`` and
``DFOS_RELAY_BODY_MIN_RATE``) set the request-body deadline of a relay run
as ``dfos-relay serve``: the grace from the start, one second later per
``min-rate`` bytes received, but never more than the grace ahead; a body
past it is answered 408 with a JSON error; a body that keeps pace is read;
a bad value stops start-up in one line, exit 2."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Mapping

import pytest

from .conftest import DFOS_RELAY, RelayProcess, clean_env

SLACK_S = 3.0  # how late past the deadline an answer may come on a busy machine


def post_slowly(port: int, pieces: int, every_s: float) -> tuple[int, dict[str, str], float]:
    """POST /operations with a declared 1000-byte body of which ``pieces``
    bytes are sent, one each ``every_s`` seconds, then nothing more; the
    status, JSON body and seconds until the relay answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = b"POST /operations HTTP/1.1\r\nHost: relay\r\nContent-Length: 1000\r\n\r\n"
        sock.sendall(head)
        started = time.monotonic()
        sock.settimeout(every_s)
        answer = b""
        for _ in range(pieces):
            try:
                answer = sock.recv(65536)
                break  # answered while dripping
            except TimeoutError:
                sock.sendall(b" ")
        sock.settimeout(30)
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        elapsed = time.monotonic() - started
        head_bytes, _, rest = answer.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head_bytes.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += sock.recv(65536)
    return int(head_bytes.split(b" ", 2)[1]), json.loads(rest[:length]), elapsed


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--store", "memory://", "--body-grace", "1"], {}),
        (["--store", "memory://"], {"DFOS_RELAY_BODY_GRACE": "1"}),
    ],
    ids=["flag", "environment"],
)
def test_body_grace_sets_when_a_silent_body_is_answered_408(
    args: list[str], env: Mapping[str, str]
) -> None:
    relay = RelayProcess(args, env=env)
    with relay.explained():
        status, body, elapsed = post_slowly(relay.port, pieces=0, every_s=1)
    relay.stop()
    assert status == 408 and body == {"error": "the request body arrived too slowly"}
    assert 1 <= elapsed < 1 + SLACK_S  # the default grace is 10 s


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--store", "memory://", "--body-grace", "1.5", "--body-min-rate", "1"], {}),
        (
            ["--store", "memory://"],
            {"DFOS_RELAY_BODY_GRACE": "1.5", "DFOS_RELAY_BODY_MIN_RATE": "1"},
        ),
    ],
    ids=["flag", "environment"],
)
def test_body_min_rate_lets_a_body_that_keeps_pace_run_past_the_grace(
    args: list[str], env: Mapping[str, str]
) -> None:
    """A byte every half second keeps ahead of one second a byte: six
    bytes over three seconds, twice the grace, are read; once they stop,
    the answer is 408 the grace after the last (at 4.5 s): the bytes sent
    faster than the rate banked no more than the grace (not 1.5 s + 6 s)."""
    relay = RelayProcess(args, env=env)
    with relay.explained():
        status, body, elapsed = post_slowly(relay.port, pieces=6, every_s=0.5)
    relay.stop()
    assert status == 408 and "slowly" in body["error"]
    assert 3 + 1.5 <= elapsed < 3 + 1.5 + SLACK_S


def test_a_high_min_rate_cuts_a_dripping_body_off_at_the_grace() -> None:
    relay = RelayProcess(["--store", "memory://", "--body-grace", "1", "--body-min-rate", "1000"])
    with relay.explained():
        status, body, elapsed = post_slowly(relay.port, pieces=20, every_s=0.5)
    relay.stop()
    assert status == 408 and "slowly" in body["error"]
    assert 1 <= elapsed < 1 + SLACK_S  # 1 s + 2 bytes / 1000 bytes a second


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["--body-grace", "-1"], {}, "--body-grace"),
        (["--body-min-rate", "1.5"], {}, "--body-min-rate"),
        ([], {"DFOS_RELAY_BODY_GRACE": "soon"}, "DFOS_RELAY_BODY_GRACE"),
        ([], {"DFOS_RELAY_BODY_MIN_RATE": "0"}, "DFOS_RELAY_BODY_MIN_RATE"),
    ],
)
def test_a_bad_deadline_value_is_one_line_exit_2(
    argv: list[str], env: Mapping[str, str], named: str
) -> None:
    proc = subprocess.run(
        [DFOS_RELAY, "serve", *argv],
        capture_output=True,
        text=True,
        env=clean_env(env),
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and named in proc.stderr
