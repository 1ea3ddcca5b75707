"""Run a request's prechecks on worker threads.

Role: the precheck of an op (canonical CBOR, CID, Ed25519 verify; see
``relay/protocol/precheck.py``) needs no chain state, and most of its time is
spent inside libsodium, which PyNaCl calls with the GIL released. So a batch
split over N threads verifies on N cores while the event loop stays free for
other requests; the CBOR encoding (which holds the GIL) of one thread overlaps
the signature checks of the others.

Invariants:
- results come back in input order, exactly as a serial run would give them;
- small batches run inline: handing work to threads costs more than it
  gains below a few dozen verifications;
- the pool is created on first use and shut down by ``close()`` (the relay's
  stop); a closed pool is recreated if the relay starts again.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from relay.protocol import DecodedJws, precheck

# Chunks hold at least this many ops; a batch too small for two chunks is
# checked inline. Measured on 2 cores: small runs on threads (the rounds of a
# shuffled stream, a few ops each) cost more in hand-offs and GIL switches
# than they gain; batches of 64 and more gain nearly 2x when a core is free.
MIN_CHUNK = 32
# Threads by default: one per core, at most this many (verification scales
# with cores; beyond a handful the serialized sequencing pass is the limit).
MAX_DEFAULT_THREADS = 8

Job = tuple[DecodedJws, Iterable[bytes]]


def default_threads() -> int:
    return max(1, min(MAX_DEFAULT_THREADS, os.cpu_count() or 1))


def _run(jobs: Sequence[Job]) -> list[DecodedJws]:
    return [precheck(decoded, keys) for decoded, keys in jobs]


class PrecheckPool:
    """Prechecks batches of tokens on ``threads`` worker threads."""

    def __init__(self, threads: int | None = None) -> None:
        self.threads = default_threads() if threads is None else max(1, threads)
        self._executor: ThreadPoolExecutor | None = None

    async def run(self, jobs: Sequence[Job]) -> list[DecodedJws]:
        chunks = self._split(jobs)
        if len(chunks) <= 1:
            return _run(jobs)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="precheck")
        loop = asyncio.get_running_loop()
        done = await asyncio.gather(
            *(loop.run_in_executor(self._executor, _run, chunk) for chunk in chunks)
        )
        return [decoded for chunk in done for decoded in chunk]

    def _split(self, jobs: Sequence[Job]) -> list[Sequence[Job]]:
        n = min(self.threads, len(jobs) // MIN_CHUNK)
        if n <= 1:
            return [jobs]
        size = -(-len(jobs) // n)
        return [jobs[i : i + size] for i in range(0, len(jobs), size)]

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
