"""``dfos-relay dump-log`` against a server that is not a relay (a proxy's
HTML error page, JSON of another shape, bytes that are not HTTP) fails with
one line and status 1, never a traceback, and leaves no file behind."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import DFOS_RELAY, clean_env
from .test_command_lines import assert_one_line_failure

HTML_500 = b"<html><body>\n<h1>500 Internal Server Error</h1>\n<hr><p>nginx</p>\n</body></html>\n"


def _http(status: str, content_type: str, body: bytes) -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
    return f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


ANSWERS = {
    "html-500": (_http("500 Internal Server Error", "text/html", HTML_500), "answered 500"),
    "html-200": (_http("200 OK", "text/html", b"<html>hi</html>"), "did not answer JSON"),
    "json-array": (_http("200 OK", "application/json", b"[1, 2, 3]"), "did not answer a log page"),
    "json-string": (_http("200 OK", "application/json", b'"log"'), "did not answer a log page"),
    "entry-not-object": (
        _http("200 OK", "application/json", b'{"entries": [1], "cursor": null}'),
        "log entry must be a JSON object",
    ),
    "json-deep": (_http("200 OK", "application/json", b"[" * 100_000), "did not answer JSON"),
    "not-http": (b"\x00\xffgarbage\r\n\r\n", "illegal status line"),
}


class CannedServer:
    """Answers every request with the same bytes, then closes."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            with conn, contextlib.suppress(OSError):
                conn.recv(65536)
                conn.sendall(self.answer)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


@pytest.fixture(params=sorted(ANSWERS))
def server(request: pytest.FixtureRequest) -> Iterator[tuple[CannedServer, str]]:
    answer, expected = ANSWERS[request.param]
    canned = CannedServer(answer)
    yield canned, expected
    canned.close()


def test_a_dump_from_a_server_that_is_not_a_relay(
    server: tuple[CannedServer, str], tmp_path: Path
) -> None:
    canned, expected = server
    target = tmp_path / "log.jsonl"
    done = subprocess.run(
        [DFOS_RELAY, "dump-log", canned.url, "-o", str(target)],
        env=clean_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    line = assert_one_line_failure(done, "dump-log")
    assert done.returncode == 1
    assert expected in line, line
    assert not target.exists()
