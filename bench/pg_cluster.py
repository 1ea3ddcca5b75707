"""A throwaway Postgres cluster for the benchmarks, configured as an operator
would size one for a relay (``--pg-tuned`` in ``bench.scale``).

Why: a stock Postgres install keeps 128 MB of shared buffers and leans on
the OS page cache for the rest. On a machine whose kernel reclaims the page
cache aggressively (this one runs DAMON page-out), every index page beyond
those 128 MB is a disk read, and the benchmark measures the host's cache
policy instead of the relay. The cluster is created with the server's own
``initdb`` in a temporary directory (owned by the ``postgres`` user when run
as root, since Postgres refuses to run as root), listens on a free loopback
port with trust auth, and is removed afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from relay.testing.server import free_port

# Sized for a relay holding millions of ops on a host with RAM to spare.
TUNED = {
    "shared_buffers": "2GB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "15min",
    "wal_compression": "on",
}


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if found:
        return found[-1]
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} not found: a Postgres server installation is needed")
    return path


def _run(cmd: list[str]) -> None:
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr.decode()[-2000:]}")


@contextmanager
def private_cluster(settings: dict[str, str]) -> Iterator[str]:
    """Start a fresh cluster with ``settings``; yield its URL (database postgres)."""
    root = tempfile.mkdtemp(prefix="dfos-bench-pg-")
    data = os.path.join(root, "data")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    server = {
        **settings,
        "port": str(port),
        "listen_addresses": "127.0.0.1",
        "unix_socket_directories": root,
    }
    options = " ".join(f"-c {k}={v}" for k, v in server.items())
    try:
        _run([_bin("initdb"), "-D", data, "-A", "trust", "-U", "postgres"])
        _run([_bin("pg_ctl"), "-D", data, "-l", f"{root}/log", "-w", "-o", options, "start"])
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            _run([_bin("pg_ctl"), "-D", data, "-m", "fast", "-w", "stop"])
    finally:
        shutil.rmtree(root, ignore_errors=True)
