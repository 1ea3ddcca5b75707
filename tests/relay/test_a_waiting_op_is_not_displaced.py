"""Another sender's token of a waiting op's CID neither pushes it out of the
buffer nor takes it out with it, so the genuine op is sequenced when its
dependency arrives, whichever token came first:

- an op whose header claims the waiting op's CID for another payload is
  rejected (cid-mismatch) and never parked;
- a copy with a forged signature (same payload, same CID) waits beside it as
  a copy; when neither signature can be checked yet, whichever is buffered
  first is tried first, and if it fails the other is tried;
- a waiting identity update is not pushed out by a copy another identity
  signed (its signature checks, but under the wrong identity);
- a copy that finds the buffer full is told so (it is not kept), while the
  waiting op sent again while the buffer is full stays buffered;
- a waiting op keeps at most ``max_copies_per_op`` copies: one more is told
  ``buffer-full`` (it is not kept), a copy sent again is still waiting, and a
  token signed by the signer its payload names still takes the buffered op's
  place; an identity update names none, so other identities' signatures of
  it count against the cap;
- when the buffered op is woken and waits again, its copies are tried too
  (a forgery under a key id the signer never holds waits for the signer's
  next update for good, while the genuine copy can be sequenced);
- a copy sent again that now takes the buffered op's place is no longer a
  copy, and a copy tried and sequenced within its own request answers
  ``new``;
- a request line is answered waiting only if its token is buffered after
  the request: one whose CID another token of the request sequenced, or
  whose token another line sequenced, answers what sending it again would."""

from __future__ import annotations

import pytest

from relay import Relay, RelayConfig, create_relay
from relay.protocol import (
    TYP_CONTENT,
    format_timestamp,
    sign_jws,
)
from relay.testing.workload import WorkloadBuilder
from stores.base import RelayStore
from tests.stores.conftest import reopen
from tests.support.relay_api import PAST_MS
from tests.support.waiting_ops import (
    chain_with_a_gap,
    forged_signature,
    identity_update_with_a_gap,
    other_identities,
    signed_by,
)

MISSING = "bafyreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"


async def _released_by(relay: Relay, dependency: str, waiting_cid: str, token: str) -> None:
    """``dependency`` arrives: the op waiting for it is sequenced, as it was sent."""
    assert [r.status.value for r in await relay.ingest([dependency])] == ["new"]
    stored = await relay.store.get_operation(waiting_cid)
    assert stored is not None and stored.jws_token == token


async def test_a_header_claiming_a_waiting_ops_cid_is_rejected(store: RelayStore) -> None:
    author, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(101)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity, genesis])
        assert (await relay.ingest([update2]))[0].waits_for is not None
        payload = {
            "version": 1, "type": "update", "did": author.did,
            "previousOperationCID": MISSING, "documentCID": None, "baseDocumentCID": None,
            "createdAt": format_timestamp(PAST_MS + 10**6), "note": "impostor",
        }  # fmt: skip
        header = {"alg": "EdDSA", "typ": TYP_CONTENT, "kid": author.kid, "cid": waiting_cid}
        result = (await relay.ingest([sign_jws(header, payload, author.keypair)]))[0]
        assert result.status.value == "rejected"
        assert result.reason is not None and result.reason.value == "cid-mismatch"
        await _released_by(relay, update1, waiting_cid, update2)


async def test_a_copy_signed_by_another_identity_does_not_replace_it(store: RelayStore) -> None:
    b = WorkloadBuilder(seed=206, start_ms=PAST_MS)
    other = b.identity()  # not the author (another seed)
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(106)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity, genesis, *b.tokens])
        await relay.ingest([update2])
        copy = signed_by(update2, other)
        assert (await relay.ingest([copy]))[0].waits_for is not None  # its signature checks
        await _released_by(relay, update1, waiting_cid, update2)


@pytest.mark.parametrize("same_request", [False, True], ids=["later", "same-request"])
async def test_a_forged_copy_does_not_replace_the_waiting_op(
    store: RelayStore, same_request: bool
) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(102)
    forged = forged_signature(update2)  # same CID; its signature does not check
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity, genesis])
        for batch in [[update2, forged]] if same_request else [[update2], [forged]]:
            await relay.ingest(batch)
        await _released_by(relay, update1, waiting_cid, update2)


async def test_a_waiting_op_sent_again_to_a_full_buffer_stays(store: RelayStore) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(103)
    relay = create_relay(store, config=RelayConfig(max_pending=1))
    async with relay.running():
        await relay.ingest([identity, genesis])
        await relay.ingest([update2])
        await relay.ingest([update2])  # the buffer is full (of this very op)
        await _released_by(relay, update1, waiting_cid, update2)


async def test_a_forged_copy_parked_while_the_waiting_op_wakes_gives_way(
    store: RelayStore,
) -> None:
    """The forged copy is parked by the request whose genesis wakes the
    buffered chain (update 1, then update 2): the buffered update 2 is tried,
    not left behind waiting for a dependency already met."""
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(105)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity])
        await relay.ingest([update1])
        await relay.ingest([update2])
        await relay.ingest([genesis, forged_signature(update2)])
        stored = await store.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2
        assert await store.get_unsequenced(10) == []


@pytest.mark.parametrize("forged_first", [True, False], ids=["forged-first", "genuine-first"])
@pytest.mark.parametrize("same_request", [False, True], ids=["later", "same-request"])
async def test_neither_token_checkable_yet_both_wait_and_the_genuine_one_is_sequenced(
    store: RelayStore, forged_first: bool, same_request: bool
) -> None:
    """The signer's identity has not arrived, so no signature can be checked
    when the two tokens arrive; both wait, and the genuine one is sequenced."""
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(107)
    forged = forged_signature(update2)
    tokens = [forged, update2] if forged_first else [update2, forged]
    relay = create_relay(store)
    async with relay.running():
        for batch in [tokens] if same_request else [[t] for t in tokens]:
            assert all(r.waits_for is not None for r in await relay.ingest(batch))
        async with store.sequencing() as session:
            assert await session.count_pending() == 2  # one op and its copy
        await relay.ingest([identity, genesis, update1])
        stored = await store.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2
        assert await store.get_unsequenced(10) == []
        async with store.sequencing() as session:
            assert await session.count_pending() == 0


async def test_a_waiting_identity_update_outlasts_a_copy_another_identity_signed(
    store: RelayStore,
) -> None:
    """Update 2 waits for update 1 and for the key update 1 introduces, so its
    signature cannot be checked; a copy signed by another (known) identity
    checks, and waits in its place, but fails once update 1 arrives."""
    update2_cid, (genesis, update1, update2) = identity_update_with_a_gap(208)
    [other], others_known = other_identities(209)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([genesis, *others_known])
        assert (await relay.ingest([update2]))[0].waits_for is not None
        assert (await relay.ingest([signed_by(update2, other)]))[0].waits_for is not None
        await relay.ingest([update1])
        stored = await store.get_operation(update2_cid)
        assert stored is not None and stored.jws_token == update2
        assert await store.get_unsequenced(10) == []


async def test_a_copy_that_finds_the_buffer_full_is_told_so(store: RelayStore) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(109)
    relay = create_relay(store, config=RelayConfig(max_pending=1))
    async with relay.running():
        assert (await relay.ingest([update2]))[0].waits_for is not None
        full = (await relay.ingest([forged_signature(update2)]))[0]
        assert full.reason is not None and full.reason.value == "buffer-full"
        await relay.ingest([identity, genesis, update1])
        stored = await store.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2


async def test_a_waiting_copy_outlives_a_restart(store: RelayStore) -> None:
    """The forged token is buffered first, the genuine one as its copy; the
    relay restarts (a new handle on the same storage) before the chain
    arrives, and the genuine op is still there to be sequenced."""
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(110)
    before = create_relay(store)
    async with before.running():
        await before.ingest([forged_signature(update2)])
        await before.ingest([update2])
    again = reopen(store)
    after = create_relay(again)
    async with after.running():
        await after.ingest([identity, genesis, update1])
        stored = await again.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2
        assert await again.get_unsequenced(10) == []


def _copy_capped(store: RelayStore, cap: int) -> Relay:
    return create_relay(store, config=RelayConfig(max_copies_per_op=cap))


@pytest.mark.parametrize("same_request", [False, True], ids=["later", "same-request"])
async def test_a_copy_beyond_the_per_op_cap_is_told_buffer_full(
    store: RelayStore, same_request: bool
) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(111)
    first, second, third = (forged_signature(update2, seed) for seed in (21, 22, 23))
    relay = _copy_capped(store, 2)
    async with relay.running():
        await relay.ingest([identity, genesis])
        assert (await relay.ingest([update2]))[0].waits_for is not None
        if same_request:
            results = await relay.ingest([first, second, third])
        else:
            results = [r for t in (first, second, third) for r in await relay.ingest([t])]
        assert [r.waits_for is not None for r in results] == [True, True, False]
        assert results[2].reason is not None and results[2].reason.value == "buffer-full"
        assert "other tokens of this operation" in (results[2].error or "")
        again = (await relay.ingest([second]))[0]  # kept already: not one more
        assert again.waits_for is not None
        async with store.sequencing() as session:
            assert await session.count_pending() == 3  # the op and its two copies
        await _released_by(relay, update1, waiting_cid, update2)
        async with store.sequencing() as session:
            assert await session.count_pending() == 0


async def test_a_token_that_checks_as_claimed_takes_the_place_at_the_cap(
    store: RelayStore,
) -> None:
    """A forgery is buffered first and another waits beside it, so the cap
    of one copy is reached; the genuine token still takes the forgery's
    place, the forgery waiting as a copy, and is sequenced."""
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(112)
    relay = _copy_capped(store, 1)
    async with relay.running():
        await relay.ingest([identity, genesis])
        assert (await relay.ingest([forged_signature(update2, 31)]))[0].waits_for is not None
        assert (await relay.ingest([forged_signature(update2, 32)]))[0].waits_for is not None
        refused = (await relay.ingest([forged_signature(update2, 33)]))[0]
        assert refused.reason is not None and refused.reason.value == "buffer-full"
        assert (await relay.ingest([update2]))[0].waits_for is not None
        await _released_by(relay, update1, waiting_cid, update2)
        assert await store.get_unsequenced(10) == []


async def test_the_copy_cap_counts_copies_kept_before_a_restart(store: RelayStore) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(113)
    before = _copy_capped(store, 1)
    async with before.running():
        await before.ingest([update2])  # nothing checkable yet: forgeries wait as copies
        assert (await before.ingest([forged_signature(update2, 41)]))[0].waits_for is not None
    again = reopen(store)
    after = _copy_capped(again, 1)
    async with after.running():
        refused = (await after.ingest([forged_signature(update2, 42)]))[0]
        assert refused.reason is not None and refused.reason.value == "buffer-full"
        await after.ingest([identity, genesis, update1])
        stored = await again.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2


async def test_copies_are_tried_when_the_buffered_op_wakes_and_waits_again(
    store: RelayStore,
) -> None:
    """Nothing of the author is known when a forgery under a key id the
    author never holds takes the CID, then the genuine op waits as its copy.
    The author's chain wakes the forgery, which waits again (for a key the
    author may add later); the genuine copy is tried and sequenced."""
    author, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(151)
    stranger = WorkloadBuilder(seed=152, start_ms=PAST_MS).identity()
    bogus = signed_by(update2, stranger, kid=f"{author.did}#no-such-key")
    relay = create_relay(store)
    async with relay.running():
        assert (await relay.ingest([bogus]))[0].waits_for is not None
        assert (await relay.ingest([update2]))[0].waits_for is not None
        results = await relay.ingest([identity, genesis, update1])
        assert [r.status.value for r in results] == ["new", "new", "new"]
        stored = await store.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2
        assert await store.get_unsequenced(10) == []


async def test_a_copy_that_takes_the_place_is_no_longer_a_copy(store: RelayStore) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(451)
    relay = _copy_capped(store, 1)
    async with relay.running():
        assert (await relay.ingest([forged_signature(update2, 61)]))[0].waits_for is not None
        assert (await relay.ingest([update2]))[0].waits_for is not None  # a copy: uncheckable
        await relay.ingest([identity, genesis])  # update 1 is still missing
        assert (await relay.ingest([update2]))[0].waits_for is not None  # checks: takes the place
        assert (await store.find_buffered([waiting_cid]))[waiting_cid].jws_token == update2
        async with store.sequencing() as session:
            copies = await session.get_copy_hashes([waiting_cid])
            pending = await session.count_pending()
        assert (pending, sum(map(len, copies.values()))) == (2, 1)  # the op, the forgery
        await _released_by(relay, update1, waiting_cid, update2)


async def test_a_copy_sequenced_within_its_request_answers_new(store: RelayStore) -> None:
    """Another identity's signature of update 2 holds the CID; the request
    bringing the genesis also brings the genuine update 2, kept as its copy.
    The genesis wakes update 1 and the other signature, which is rejected;
    the copy is then tried and sequenced, and its line answers so."""
    update2_cid, (genesis, update1, update2) = identity_update_with_a_gap(551)
    [other], others_known = other_identities(552)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest(others_known)
        assert (await relay.ingest([update1]))[0].waits_for is not None  # for the genesis
        assert (await relay.ingest([signed_by(update2, other)]))[0].waits_for is not None
        results = await relay.ingest([genesis, update2])
        assert [r.status.value for r in results] == ["new", "new"]
        stored = await store.get_operation(update2_cid)
        assert stored is not None and stored.jws_token == update2


async def test_other_identities_signatures_of_an_identity_update_count_against_the_cap(
    store: RelayStore,
) -> None:
    """Each checks, so each takes the buffered update's place in turn; the
    ones displaced are copies, and the cap bounds them."""
    update2_cid, (genesis, update1, update2) = identity_update_with_a_gap(351)
    others, others_known = other_identities(352, 5)
    relay = _copy_capped(store, 1)
    async with relay.running():
        await relay.ingest([genesis, *others_known])
        assert (await relay.ingest([update2]))[0].waits_for is not None
        answers = [(await relay.ingest([signed_by(update2, x)]))[0] for x in others]
        assert [a.waits_for is not None for a in answers] == [True] + [False] * 4
        assert all(a.reason is not None and a.reason.value == "buffer-full" for a in answers[1:])
        async with store.sequencing() as session:
            assert await session.count_pending() == 2  # one op, one copy
        await relay.ingest([update1])
        stored = await store.get_operation(update2_cid)
        assert stored is not None and stored.jws_token == update2
        assert await store.get_unsequenced(10) == []


async def test_a_copy_sent_again_to_a_full_buffer_is_still_waiting(store: RelayStore) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(114)
    forged = forged_signature(update2, 51)
    relay = create_relay(store, config=RelayConfig(max_pending=2))
    async with relay.running():
        await relay.ingest([identity, genesis])
        await relay.ingest([update2])
        assert (await relay.ingest([forged]))[0].waits_for is not None  # the buffer is full now
        again = (await relay.ingest([forged]))[0]  # kept already: it holds its slot
        assert again.waits_for is not None and again.reason is not None
        assert again.reason.value != "buffer-full"
        async with store.sequencing() as session:
            assert await session.count_pending() == 2
        await _released_by(relay, update1, waiting_cid, update2)


async def test_a_copy_sent_again_that_takes_the_place_and_is_sequenced_answers_new(
    store: RelayStore,
) -> None:
    """Nothing of the author is known: forgeries of updates 1 and 2 hold
    their CIDs, the genuine updates wait beside them as copies. The request
    bringing the identity and the genesis also brings update 2 again (now
    checkable: it takes its CID's place, waiting for update 1). The forged
    update 1 is rejected, the genuine one sequenced, and update 2 with it,
    as the very token that request's line sent: the line answers new."""
    _, cid2, (identity, genesis, update1, update2) = chain_with_a_gap(801)
    kept = (forged_signature(update1, 81), update1, forged_signature(update2, 82), update2)
    relay = create_relay(store)
    async with relay.running():
        for token in kept:  # each waits (nothing checkable): a forgery holds, a copy beside
            assert (await relay.ingest([token]))[0].waits_for is not None
        results = await relay.ingest([identity, genesis, update2])
        stored = await store.get_operation(cid2)
        assert stored is not None and stored.jws_token == update2
        assert [r.status.value for r in results] == ["new", "new", "new"]
        async with store.sequencing() as session:
            assert await session.count_pending() == 0


async def test_a_copy_left_behind_by_its_sequenced_op_is_answered_so(store: RelayStore) -> None:
    """Updates 1 and 2 wait for the genesis. The request bringing the genesis
    brings a forgery of update 2 too, which waits (update 1 is not in the
    log yet) as a copy; the genesis wakes update 1, then update 2, so the
    CID is sequenced and the copy goes untried. Its line answers what
    sending it again does (a different token of a stored CID), not that it
    waits."""
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(115)
    forged = forged_signature(update2, 52)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity])
        await relay.ingest([update1])
        await relay.ingest([update2])
        results = await relay.ingest([genesis, forged])
        assert [r.status.value for r in results] == ["new", "rejected"]
        assert results[1].reason is not None and results[1].reason.value == "cid-conflict"
        again = (await relay.ingest([forged]))[0]
        assert again.status.value == "rejected" and again.waits_for is None
        stored = await store.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2
        async with store.sequencing() as session:
            assert await session.count_pending() == 0


async def test_a_holder_displaced_by_a_token_its_request_sequenced_is_answered_so(
    store: RelayStore,
) -> None:
    """A forged genesis under a key id its signer never holds takes its CID
    (it waits for the signer's next update); the genuine genesis in the same
    request is sequenced. The forgery's line answers cid-conflict, not that
    it waits: nothing of it stays buffered."""
    b = WorkloadBuilder(seed=116, start_ms=PAST_MS)
    author = b.identity()
    b.content_create(author)
    identity, genesis = b.tokens
    stranger = WorkloadBuilder(seed=117, start_ms=PAST_MS).identity()
    forged = signed_by(genesis, stranger, kid=f"{author.did}#no-such-key")
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity])
        results = await relay.ingest([forged, genesis])
        assert [r.status.value for r in results] == ["rejected", "new"]
        assert results[0].reason is not None and results[0].reason.value == "cid-conflict"
        async with store.sequencing() as session:
            assert await session.count_pending() == 0


async def test_a_token_sent_twice_in_a_request_answers_each_line_finally(
    store: RelayStore,
) -> None:
    """Update 1 waits for the genesis. A request brings update 2 twice and
    the genesis: both lines of update 2 wait at first, then the genesis
    wakes update 1, which wakes update 2, sequenced through one line; the
    other answers duplicate, as it would sent again, and neither says it
    waits."""
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(118)
    relay = create_relay(store)
    async with relay.running():
        await relay.ingest([identity])
        assert (await relay.ingest([update1]))[0].waits_for is not None
        results = await relay.ingest([update2, update2, genesis])
        assert sorted(r.status.value for r in results[:2]) == ["duplicate", "new"]
        assert results[2].status.value == "new"
        stored = await store.get_operation(waiting_cid)
        assert stored is not None and stored.jws_token == update2
