"""The precheck of a batch runs on worker threads (libsodium releases the
GIL): whatever the number of threads, each op comes back exactly as a serial
precheck gives it, in order, and the pool starts again after ``close()``."""

from __future__ import annotations

from relay.ingest.parallel import MIN_CHUNK, PrecheckPool
from relay.protocol import Ed25519Keypair, decode_jws, precheck
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
