"""Drive the real ``dfos-relay`` console command as a subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from relay.testing.server import free_port

DFOS_RELAY = str(Path(sys.executable).parent / "dfos-relay")
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
START_TIMEOUT_S = 20.0


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFOS_RELAY_")}
    env.update(extra or {})
    return env


class RelayProcess:
    """``dfos-relay serve`` on a free loopback port."""

    def __init__(
        self,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        command: Sequence[str] | None = None,
        port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        # Logs go to a file: a full stderr pipe would block the relay.
        self._log = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        base = list(command) if command else [DFOS_RELAY, "serve", "--host", "127.0.0.1"]
        self.proc = subprocess.Popen(
            [*base, "--port", str(self.port), *args],
            env=clean_env(env),
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait_healthy()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"relay exited {self.proc.returncode}: {self.output()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise TimeoutError("relay did not become healthy")

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read()

    @contextmanager
    def explained(self) -> Iterator[None]:
        """On a failure inside, stop the relay and attach everything it logged
        to the error: a client-side failure alone (a reset connection, say)
        does not tell what the relay saw."""
        try:
            yield
        except BaseException as exc:
            code, out = self.stop()
            exc.add_note(f"relay exited {code}; its output:\n{out}")
            raise

    def stop(self, timeout: float = 30) -> tuple[int, str]:
        """SIGTERM, wait; (exit status, everything the relay logged)."""
        if self._log.closed:  # stopped before
            return self.proc.returncode, ""
        if self.proc.poll() is None:
            self.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        out = self.output()
        self._log.close()
        return self.proc.returncode, out


def postgres_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def postgres_schema_url() -> Iterator[str]:
    if not postgres_available():
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    schema = f"cli_{uuid.uuid4().hex[:12]}"
    yield f"{POSTGRES_URL}?schema={schema}"
    try:
        import asyncio

        import asyncpg

        async def drop() -> None:
            conn = await asyncpg.connect(POSTGRES_URL)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            finally:
                await conn.close()

        asyncio.run(drop())
    except Exception:  # cleanup is best effort
        pass
