"""SQLite finds a chain's tips and walks a branch through indexes (the
chain's ops by ``ops_chain_log``, a child by ``ops_children``, a parent by
its CID), not by scanning the log for each op: reading a short chain costs
the same however many ops other chains hold."""

from __future__ import annotations

from pathlib import Path

from stores.sqlite import SqliteStore
from tests.stores.conftest import append, op
from tests.stores.test_sqlite_chain_reads_use_the_chain_indexes import STEP, vm_ticks

LOG = 3000  # ops of other chains, with parents, before the chain read
A = "did:dfos:a"


async def test_fork_reads_cost_the_chain_not_the_log(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "relay.db")
    await store.open()
    try:
        others = [op("o0", chain_id="did:dfos:o")]
        others += [op(f"o{i}", chain_id="did:dfos:o", parent=f"o{i - 1}") for i in range(1, LOG)]
        for i in range(0, LOG, 500):
            await append(store, *others[i : i + 500])
        await append(store, op("g"), op("u", parent="g"), op("f", parent="g"))
        head = await store.log_length()
        tips = await vm_ticks(store, lambda: store.read_chain_tips(A, "identity-op", head))
        branch = await vm_ticks(
            store, lambda: store.read_branch(A, "identity-op", "f", head, "g", 10)
        )
        # a scan of the log costs at least a few instructions per op passed
        assert tips < LOG // STEP and branch < LOG // STEP, (tips, branch)
        assert [e.cid for e in await store.read_chain_tips(A, "identity-op", head)] == ["u", "f"]
    finally:
        await store.close()
