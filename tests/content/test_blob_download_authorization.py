"""GET /content/{contentId}/blob[/{ref}] (WEB-RELAY.md "Blob Download"): the
creator reads with an auth token alone; anyone else needs a DFOSContentRead
VC-JWT from the creator to them, broad or narrowed to this chain, valid by
the wall clock, signed by a current key of a live creator."""

from __future__ import annotations

import pytest

from relay.protocol import DFOS_CONTENT_WRITE, cid_of

from .conftest import HOUR_S, World, doc_bytes, ingest_more


@pytest.fixture
async def uploaded(world: World) -> World:
    for op in (world.genesis, world.alice_update, world.bob_update):
        assert (await world.upload(world.alice, op)).status_code == 200
    return world


async def test_creator_reads_by_operation_cid(uploaded: World) -> None:
    w = uploaded
    for op in (w.genesis, w.alice_update, w.bob_update):
        response = await w.download(w.alice, op)
        assert response.status_code == 200
        assert response.content == doc_bytes(w.docs[op])
        assert response.headers["content-type"] == "application/octet-stream"
        assert response.headers["x-document-cid"] == cid_of(w.docs[op])


async def test_head_is_the_default_ref(uploaded: World) -> None:
    w = uploaded
    other_head = w.other.ops[1][0]
    assert (await w.upload(w.alice, other_head, chain=w.other)).status_code == 200
    for ref in (None, "head"):
        response = await w.download(w.alice, ref, chain=w.other)
        assert response.status_code == 200
        assert response.headers["x-document-cid"] == cid_of(w.docs[other_head])


async def test_reader_with_broad_credential(uploaded: World) -> None:
    w = uploaded
    response = await w.download(w.carol, w.genesis, w.credential(w.alice, w.carol))
    assert response.status_code == 200
    assert response.content == doc_bytes(w.docs[w.genesis])


async def test_reader_with_credential_narrowed_to_this_chain(uploaded: World) -> None:
    w = uploaded
    credential = w.credential(w.alice, w.carol, w.chain.content_id)
    assert (await w.download(w.carol, w.alice_update, credential)).status_code == 200


async def test_credential_narrowed_to_another_chain_is_403(uploaded: World) -> None:
    w = uploaded
    credential = w.credential(w.alice, w.carol, w.other.content_id)
    response = await w.download(w.carol, w.genesis, credential)
    assert response.status_code == 403
    assert "another content chain" in response.json()["error"]


async def test_non_creator_without_credential_is_403(uploaded: World) -> None:
    response = await uploaded.download(uploaded.carol, uploaded.genesis)
    assert response.status_code == 403


async def test_delegate_cannot_read_with_its_write_credential(uploaded: World) -> None:
    w = uploaded
    assert (await w.download(w.bob, w.bob_update)).status_code == 403
    grant = w.credential(w.alice, w.bob, w.chain.content_id, credential_type=DFOS_CONTENT_WRITE)
    assert (await w.download(w.bob, w.bob_update, grant)).status_code == 403


@pytest.mark.parametrize(
    ("iat_offset", "exp_offset"),
    [(-2 * HOUR_S, -HOUR_S), (-HOUR_S, 0), (HOUR_S, 2 * HOUR_S)],
    ids=["expired", "expires-now", "not-yet-valid"],
)
async def test_credential_outside_its_validity_window_is_403(
    uploaded: World, iat_offset: int, exp_offset: int
) -> None:
    w = uploaded
    credential = w.credential(w.alice, w.carol, iat=w.now_s + iat_offset, exp=w.now_s + exp_offset)
    assert (await w.download(w.carol, w.genesis, credential)).status_code == 403


async def test_credential_from_someone_other_than_the_creator_is_403(uploaded: World) -> None:
    w = uploaded
    credential = w.credential(w.mallory, w.carol)
    assert (await w.download(w.carol, w.genesis, credential)).status_code == 403


async def test_credential_for_another_subject_is_403(uploaded: World) -> None:
    w = uploaded
    credential = w.credential(w.alice, w.mallory)
    assert (await w.download(w.carol, w.genesis, credential)).status_code == 403


async def test_garbage_credential_is_403(uploaded: World) -> None:
    w = uploaded
    assert (await w.download(w.carol, w.genesis, "not.a.jwt")).status_code == 403
    token_as_credential = w.token(w.alice)
    assert (await w.download(w.carol, w.genesis, token_as_credential)).status_code == 403


async def test_credential_signed_by_a_rotated_out_key_is_403(uploaded: World) -> None:
    w = uploaded
    old_key = w.alice.keypair
    stale = w.credential(w.alice, w.carol, keypair=old_key)
    assert (await w.download(w.carol, w.genesis, stale)).status_code == 200
    since = len(w.builder.tokens)
    w.builder.rotate(w.alice)
    await ingest_more(w, since)
    assert (await w.download(w.carol, w.genesis, stale)).status_code == 403
    fresh = w.credential(w.alice, w.carol)
    assert (await w.download(w.carol, w.genesis, fresh)).status_code == 200


async def test_credentials_of_a_deleted_creator_are_revoked(uploaded: World) -> None:
    w = uploaded
    credential = w.credential(w.alice, w.carol)
    assert (await w.download(w.carol, w.genesis, credential)).status_code == 200
    since = len(w.builder.tokens)
    w.builder.delete_identity(w.alice)
    await ingest_more(w, since)
    response = await w.download(w.carol, w.genesis, credential)
    assert response.status_code == 403
    assert "deleted" in response.json()["error"]
    # ...and delegated uploads end with the creator's authority.
    assert (await w.upload(w.bob, w.bob_update)).status_code == 403


async def test_unknown_chain_and_unknown_ref_are_404(uploaded: World) -> None:
    w = uploaded
    response = await w.client.get(f"/content/{'a' * 22}/blob", headers=w.headers(w.alice))
    assert response.status_code == 404
    assert (await w.download(w.alice, "bafyreiaaaa")).status_code == 404
    assert (await w.download(w.alice, w.other.genesis_cid)).status_code == 404  # other chain


async def test_cleared_head_and_clearing_operation_are_404(uploaded: World) -> None:
    w = uploaded
    for ref in (None, "head", w.cleared):
        response = await w.download(w.alice, ref)
        assert response.status_code == 404, ref
        assert "error" in response.json()


async def test_deleted_content_has_no_head_document(uploaded: World) -> None:
    w = uploaded
    since = len(w.builder.tokens)
    w.builder.content_update(w.other, delete=True)
    await ingest_more(w, since)
    assert (await w.download(w.alice, chain=w.other)).status_code == 404
    # history stays readable by operation CID
    assert (await w.download(w.alice, w.other.genesis_cid, chain=w.other)).status_code == 200


async def test_document_not_uploaded_yet_is_404(world: World) -> None:
    response = await world.download(world.alice, world.alice_update)
    assert response.status_code == 404
    assert "not been uploaded" in response.json()["error"]
