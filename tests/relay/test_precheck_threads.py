"""The precheck of a batch runs on worker threads (libsodium releases the
GIL), or, for a mid-sized batch, is shared between the caller and the
threads: whatever the number of threads, each op comes back exactly as a
serial precheck gives it, in order, and the pool starts again after
``close()``."""

from __future__ import annotations

import threading
import time

from relay.ingest.parallel import MIN_CHUNK, SHARED_CHUNK, PrecheckPool
from relay.protocol import DecodedJws, Ed25519Keypair, decode_jws, precheck
from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS

WRONG = Ed25519Keypair.from_seed(b"\x07" * 32).public_key


async def test_threads_give_what_a_serial_precheck_gives() -> None:
    b = WorkloadBuilder(seed=81, start_ms=PAST_MS)
    actors = [b.identity() for _ in range(3 * MIN_CHUNK)]
    # every third op is offered only a wrong key: its precheck records none
    jobs = [
        (decode_jws(token), [WRONG] if n % 3 == 0 else [WRONG, actor.keypair.public_key])
        for n, (token, actor) in enumerate(zip(b.tokens, actors, strict=True))
    ]
    serial = [precheck(decoded, keys) for decoded, keys in jobs]
    assert sum(c.verified_key is not None for c in serial) == 2 * MIN_CHUNK
    pool = PrecheckPool(threads=3)
    try:
        for _ in range(2):  # the second run, after close(), starts the threads again
            assert await pool.run(jobs) == serial
            pool.close()
    finally:
        pool.close()


def _jobs(n: int, seed: int) -> list[tuple[DecodedJws, list[bytes]]]:
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    actors = [b.identity() for _ in range(n)]
    return [
        (decode_jws(token), [WRONG] if k % 3 == 0 else [WRONG, actor.keypair.public_key])
        for k, (token, actor) in enumerate(zip(b.tokens, actors, strict=True))
    ]


async def test_a_mid_sized_batch_shared_with_the_caller_gives_the_serial_result() -> None:
    jobs = _jobs(2 * MIN_CHUNK - 1, seed=82)  # under the all-on-threads size
    serial = [precheck(decoded, keys) for decoded, keys in jobs]
    pool = PrecheckPool(threads=4)
    try:
        assert await pool.run(jobs) == serial
    finally:
        pool.close()


async def test_a_chunk_no_thread_has_started_is_checked_by_the_caller() -> None:
    """The threads busy with other work (another request's chunks) do not
    hold a shared batch up: its waiting chunks are taken back."""
    jobs = _jobs(4 * SHARED_CHUNK, seed=83)
    serial = [precheck(decoded, keys) for decoded, keys in jobs]
    pool = PrecheckPool(threads=2)
    release = threading.Event()
    executor = pool._started()
    busy = [executor.submit(release.wait, 30) for _ in range(pool.threads)]
    try:
        started = time.monotonic()
        assert await pool.run(jobs) == serial
        assert time.monotonic() - started < 10  # not waiting for the busy threads
    finally:
        release.set()
        for future in busy:
            future.result()
        pool.close()
