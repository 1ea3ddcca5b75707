"""Ctrl-C (SIGINT) ends a command quietly with status 130: no traceback,
and an interrupted first dump leaves no empty file behind."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import DFOS_RELAY, clean_env


class SilentServer:
    """Accepts connections and never answers: a client waits for a reply."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.connected = threading.Event()
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self._held.append(conn)
            self.connected.set()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the thread blocked in accept()
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self._held:
            conn.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def interrupt_once_connected(
    args: list[str], server: SilentServer
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(
        [DFOS_RELAY, *args], env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    assert server.connected.wait(30), "the command never connected"
    server.connected.wait(0.5)  # let it send its request and wait for the answer
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_ctrl_c_ends_a_dump_without_a_traceback_or_an_empty_file(
    silent_server: SilentServer, tmp_path: Path
) -> None:
    target = tmp_path / "log.jsonl"
    args = ["dump-log", f"http://{silent_server.address}", "-o", str(target)]
    done = interrupt_once_connected(args, silent_server)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, done.stderr
    assert not target.exists()


def test_ctrl_c_ends_an_import_without_a_traceback(
    silent_server: SilentServer, tmp_path: Path
) -> None:
    dump = tmp_path / "log.jsonl"
    dump.write_text("")
    store = f"postgresql://u@{silent_server.address}/db"
    done = interrupt_once_connected(["import", str(dump), "--store", store], silent_server)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, done.stderr
