"""A relay in a child process that tests can SIGKILL and restart on the same
store: ``hypercorn relay.asgi:app`` exactly as README and OPERATIONS.md
document it, configured by ``DFOS_RELAY_*`` alone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import httpx

from relay.testing.server import free_port


class RelayProcess:
    def __init__(
        self,
        store_url: str,
        workers: int = 1,
        settings: dict[str, str] | None = None,
        hypercorn_args: Sequence[str] = (),
    ) -> None:
        self.store_url = store_url
        self.workers = workers
        self.settings = settings or {}  # more DFOS_RELAY_* variables
        # more of hypercorn's own options, e.g. ``--config`` (its --bind wins over the file's)
        self.hypercorn_args = list(hypercorn_args)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout: float = 30.0) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DFOS_RELAY_")}
        env["DFOS_RELAY_STORE"] = self.store_url
        env.update(self.settings)
        env["DFOS_RELAY_LOG_LEVEL"] = "warning"  # stderr is a pipe read only on failure
        cmd = [
            str(Path(sys.executable).parent / "hypercorn"), "relay.asgi:app",
            "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers),
            *self.hypercorn_args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            cmd,
            cwd=tempfile.gettempdir(),  # the installed package, not the checkout
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
