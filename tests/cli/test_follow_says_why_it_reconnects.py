"""``dfos-relay follow`` reconnects with backoff (forever without
``--retries``), and says on stderr, one line per failed attempt, why and
when it tries again: a relay that is down, or a URL that is no relay's,
is not retried in silence. Ctrl-C still ends it with status 130."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time

from .conftest import DFOS_RELAY, clean_env
from .test_a_relay_answering_garbage_fails_a_dump_in_one_line import (
    ANSWERS,
    CannedServer,
)
from .test_command_lines import assert_one_line_failure


def test_each_failed_attempt_is_one_line_then_the_error() -> None:
    done = subprocess.run(
        [DFOS_RELAY, "follow", "http://127.0.0.1:9", "--retries", "2"],
        env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    *notes, last = done.stderr.strip().splitlines()
    assert_one_line_failure(_only(done, last), "follow")
    assert done.returncode == 1 and "gave up after 3 failures" in last, last
    assert len(notes) == 2, done.stderr
    for note in notes:
        assert note.startswith("dfos-relay follow: http://127.0.0.1:9: "), note
        assert "retrying in " in note, note


def _only(done: subprocess.CompletedProcess[str], line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, line + "\n")


def test_a_server_answering_500_forever_is_reported_until_ctrl_c() -> None:
    server = CannedServer(ANSWERS["html-500"][0])
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [DFOS_RELAY, "follow", server.url], env=clean_env(), stdout=subprocess.PIPE,
            stderr=err, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and "retrying in" not in _read(err):
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            server.close()
        said = _read(err)
    assert f"dfos-relay follow: {server.url}: 500" in said, said
    assert "Traceback" not in said, said
    assert proc.returncode == 130, said


def _read(err: object) -> str:
    err.seek(0)  # type: ignore[attr-defined]
    return str(err.read())  # type: ignore[attr-defined]
