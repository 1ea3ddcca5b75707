"""Run a request's prechecks on worker threads.

Role: the precheck of an op (canonical CBOR, CID, Ed25519 verify; see
``relay/protocol/precheck.py``) needs no chain state, and most of its time is
spent inside libsodium, which PyNaCl calls with the GIL released. So a batch
split over N threads verifies on N cores while the event loop stays free for
other requests; the CBOR encoding (which holds the GIL) of one thread overlaps
the signature checks of the others.

Invariants:
- results come back in input order, exactly as a serial run would give them;
- large batches run wholly on the threads, so the event loop stays free;
- mid-sized batches (a shuffled stream's requests and woken cascades) are
  shared: the caller checks one chunk itself while the threads check the
  rest, and takes back any chunk no thread has started. That costs one
  hand-off and no wait on the event loop, and blocks the loop no longer than
  checking the whole batch inline would;
- tiny batches run inline: a hand-off costs more than it gains;
- the pool is created on first use and shut down by ``close()`` (the relay's
  stop); a closed pool is recreated if the relay starts again.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from relay.protocol import DecodedJws, precheck

# Chunks hold at least this many ops; a batch too small for two chunks is
# checked inline. Measured on 2 cores: small runs on threads (the rounds of a
# shuffled stream, a few ops each) cost more in hand-offs and GIL switches
# than they gain; batches of 64 and more gain nearly 2x when a core is free.
MIN_CHUNK = 32
# Below 2 * MIN_CHUNK, batches of at least this many are shared between the
# caller and the threads (chunks of at least SHARED_CHUNK ops).
SHARED_CHUNK = 8
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
        chunks = self._split(jobs, MIN_CHUNK)
        if len(chunks) > 1:
            loop = asyncio.get_running_loop()
            executor = self._started()
            done = await asyncio.gather(
                *(loop.run_in_executor(executor, _run, chunk) for chunk in chunks)
            )
            return [decoded for chunk in done for decoded in chunk]
        chunks = self._split(jobs, SHARED_CHUNK)
        if len(chunks) > 1:
            return self._shared(chunks)
        return _run(jobs)

    def _shared(self, chunks: list[Sequence[Job]]) -> list[DecodedJws]:
        executor = self._started()
        futures: list[Future[list[DecodedJws]]] = [
            executor.submit(_run, chunk) for chunk in chunks[1:]
        ]
        out = _run(chunks[0])
        for future, chunk in zip(futures, chunks[1:], strict=True):
            # A chunk no thread has started (the threads are busy with another
            # request's) is checked here; a started one is nearly done.
            out.extend(_run(chunk) if future.cancel() else future.result())
        return out

    def _started(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="precheck")
        return self._executor

    def _split(self, jobs: Sequence[Job], min_chunk: int) -> list[Sequence[Job]]:
        n = min(self.threads, len(jobs) // min_chunk)
        if n <= 1:
            return [jobs]
        size = -(-len(jobs) // n)
        return [jobs[i : i + size] for i in range(0, len(jobs), size)]

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
