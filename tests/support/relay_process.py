"""A relay in a child process (hypercorn on loopback) that tests can SIGKILL
and restart on the same store."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from relay.testing.server import free_port

ROOT = Path(__file__).resolve().parents[2]


class RelayProcess:
    def __init__(self, store_url: str, workers: int = 1) -> None:
        self.store_url = store_url
        self.workers = workers
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout: float = 30.0) -> None:
        env = {**os.environ, "DFOS_STORE_URL": self.store_url, "PYTHONPATH": str(ROOT)}
        cmd = [
            sys.executable, "-m", "hypercorn", "tests.support.app_from_env:app",
            "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = asyncio.get_running_loop().time() + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                if self.proc.poll() is not None:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise RuntimeError(f"relay process exited at startup:\n{err[-3000:]}")
                try:
                    r = await client.get(f"{self.url}/.well-known/dfos-relay")
                    if r.status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if asyncio.get_running_loop().time() > deadline:
                    self.kill()
                    raise TimeoutError("relay process did not become ready")
                await asyncio.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the server and its workers (no shutdown, no flush)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None
