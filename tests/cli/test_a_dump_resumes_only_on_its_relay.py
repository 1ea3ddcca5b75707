"""Resuming a dump against a relay that does not hold its last CID (the
dump of another relay, or an op purged since) is an error, not a dump that
reports success and never advances; a complete dump resumed on its own
relay writes nothing and succeeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay import create_relay
from relay.dumplog import DumpError, dump_log
from relay.testing.workload import mixed_workload
from stores.memory import MemoryStore
from tests.support.asgi_client import asgi_client


async def test_a_dump_resumes_only_on_a_relay_that_holds_its_last_cid(tmp_path: Path) -> None:
    target = tmp_path / "log.jsonl"
    first, other = create_relay(MemoryStore()), create_relay(MemoryStore())
    async with first.running(), other.running():
        await first.ingest(mixed_workload(20, seed=1))
        await other.ingest(mixed_workload(20, seed=2))
        for relay, base in ((first, "http://first"), (other, "http://other")):
            async with asgi_client(relay.app, base_url=base) as client:
                if relay is first:
                    assert await dump_log(client, base, target, resume=False) > 0
                    assert await dump_log(client, base, target, resume=True) == 0
                    before = target.read_bytes()
                else:
                    with pytest.raises(DumpError, match="does not hold"):
                        await dump_log(client, base, target, resume=True)
    assert target.read_bytes() == before
