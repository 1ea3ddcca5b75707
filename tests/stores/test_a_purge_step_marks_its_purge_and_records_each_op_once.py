"""Store contract for a purge in steps: a step records its purge as under
way (kept across a restart) until the last step says it is done; an op a
step names that an earlier step already removed is not recorded again; a
step can take a DID's blobs ahead of its identity."""

from __future__ import annotations

from stores.base import RelayStore
from stores.moderation import ModerationBatch
from tests.stores.conftest import append, is_durable, op, reopen

A = "did:dfos:a"


async def test_a_purge_is_under_way_from_its_first_step_to_its_last(opened: RelayStore) -> None:
    await append(opened, op("g"), op("u", parent="g", at=2), op("v", parent="u", at=3))
    records = {o.cid: o for o in await opened.operations_signed_by(A)}
    await opened.put_blob(A, "doc", b"x")
    first = ModerationBatch(A, 7, operations=[records["v"]], purge_under_way=True)
    first.blob_creators = {A}
    async with opened.moderating() as session:
        await session.apply_moderation(first)
    assert await opened.purges_under_way() == {A: 7}
    assert await opened.get_blob(A, "doc") is None
    if is_durable(opened):  # a crash here: the next start finds it
        again = reopen(opened)
        await again.open()
        try:
            assert await again.purges_under_way() == {A: 7}
        finally:
            await again.close()
    last = ModerationBatch(A, 7, operations=[records["v"], records["u"]], purge_done=True)
    async with opened.moderating() as session:
        await session.apply_moderation(last)
    assert await opened.purges_under_way() == {}
    assert [(p.seq, p.cid) for p in await opened.list_purged(A)] == [(2, "u"), (3, "v")]
    assert [o.cid for o in await opened.operations_signed_by(A)] == ["g"]
