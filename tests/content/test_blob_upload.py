"""PUT /content/{contentId}/blob/{operationCID} (WEB-RELAY.md "Blob Upload"):
creator or that operation's signer; bytes must be the committed document;
stored once per (creator DID, documentCID), byte for byte."""

from __future__ import annotations

import json

from relay.protocol import DFOS_CONTENT_WRITE, cid_of

from .conftest import CONTENT_PLANE_LIMIT_BYTES, World, doc_bytes


async def test_creator_uploads_the_document_of_an_operation(world: World) -> None:
    response = await world.upload(world.alice, world.genesis)
    assert response.status_code == 200
    assert response.json() == {
        "status": "stored",
        "contentId": world.chain.content_id,
        "documentCID": cid_of(world.docs[world.genesis]),
        "operationCID": world.genesis,
    }


async def test_creator_uploads_a_delegates_operation(world: World) -> None:
    assert (await world.upload(world.alice, world.bob_update)).status_code == 200


async def test_delegate_uploads_the_operation_it_signed(world: World) -> None:
    response = await world.upload(world.bob, world.bob_update)
    assert response.status_code == 200
    stored = await world.relay.store.get_blob(world.alice.did, response.json()["documentCID"])
    assert stored == doc_bytes(world.docs[world.bob_update])  # keyed to the creator


async def test_delegate_may_not_upload_operations_it_did_not_sign(world: World) -> None:
    response = await world.upload(world.bob, world.alice_update)
    assert response.status_code == 403
    assert "error" in response.json()


async def test_stranger_may_not_upload(world: World) -> None:
    assert (await world.upload(world.carol, world.genesis)).status_code == 403


async def test_read_credential_does_not_grant_writing(world: World) -> None:
    credential = world.credential(world.alice, world.carol, world.chain.content_id)
    response = await world.client.put(
        f"/content/{world.chain.content_id}/blob/{world.genesis}",
        content=doc_bytes(world.docs[world.genesis]),
        headers=world.headers(world.carol, credential),
    )
    assert response.status_code == 403


async def test_write_credential_alone_does_not_grant_writing_other_ops(world: World) -> None:
    grant = world.credential(
        world.alice, world.carol, world.chain.content_id, credential_type=DFOS_CONTENT_WRITE
    )
    response = await world.client.put(
        f"/content/{world.chain.content_id}/blob/{world.genesis}",
        content=doc_bytes(world.docs[world.genesis]),
        headers=world.headers(world.carol, grant),
    )
    assert response.status_code == 403


async def test_exact_bytes_are_stored_and_served(world: World) -> None:
    pretty = doc_bytes(world.docs[world.genesis], pretty=True) + b"\n"
    assert (await world.upload(world.alice, world.genesis, pretty)).status_code == 200
    response = await world.download(world.alice, world.genesis)
    assert response.status_code == 200
    assert response.content == pretty


async def test_key_order_and_whitespace_do_not_change_the_cid(world: World) -> None:
    reordered = dict(reversed(list(world.docs[world.genesis].items())))
    body = json.dumps(reordered, separators=(" , ", " : ")).encode()
    assert (await world.upload(world.alice, world.genesis, body)).status_code == 200


async def test_repeat_uploads_are_idempotent(world: World) -> None:
    first = await world.upload(world.alice, world.genesis)
    again = await world.upload(world.alice, world.genesis)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    download = await world.download(world.alice, world.genesis)
    assert download.content == doc_bytes(world.docs[world.genesis])


async def test_same_document_across_chains_of_one_creator_is_stored_once(world: World) -> None:
    assert (await world.upload(world.alice, world.genesis)).status_code == 200
    response = await world.download(world.alice, world.other.genesis_cid, chain=world.other)
    assert response.status_code == 200
    assert response.content == doc_bytes(world.docs[world.genesis])


async def test_body_with_another_documents_cid_is_400(world: World) -> None:
    body = doc_bytes(world.docs[world.alice_update])
    response = await world.upload(world.alice, world.genesis, body)
    assert response.status_code == 400
    assert "documentCID" in response.json()["error"]
    assert await world.relay.store.get_blob(world.alice.did, "x") is None


async def test_body_that_is_not_json_is_400(world: World) -> None:
    for body in (b"not json", b"\xff\xfe", b""):
        response = await world.upload(world.alice, world.genesis, body)
        assert response.status_code == 400, body
        assert "error" in response.json()


async def test_body_over_the_blob_limit_is_413(world: World) -> None:
    body = b" " * (CONTENT_PLANE_LIMIT_BYTES + 1)
    response = await world.upload(world.alice, world.genesis, body)
    assert response.status_code == 413
    assert "error" in response.json()


async def test_unknown_chain_is_404(world: World) -> None:
    response = await world.client.put(
        f"/content/{'a' * 22}/blob/{world.genesis}",
        content=doc_bytes(world.docs[world.genesis]),
        headers=world.headers(world.alice),
    )
    assert response.status_code == 404


async def test_operation_of_another_chain_is_404(world: World) -> None:
    other_op = world.other.ops[1][0]
    response = await world.upload(world.alice, other_op)
    assert response.status_code == 404


async def test_unknown_operation_and_non_content_operation_are_404(world: World) -> None:
    for ref in ("bafyreiaaaa", world.alice.head_cid):  # identity op of the creator
        response = await world.client.put(
            f"/content/{world.chain.content_id}/blob/{ref}",
            content=b"{}",
            headers=world.headers(world.alice),
        )
        assert response.status_code == 404, ref


async def test_operation_without_a_document_is_404(world: World) -> None:
    response = await world.client.put(
        f"/content/{world.chain.content_id}/blob/{world.cleared}",
        content=b"null",
        headers=world.headers(world.alice),
    )
    assert response.status_code == 404


async def test_document_must_be_utf8_json(world: World) -> None:
    text = doc_bytes(world.docs[world.genesis]).decode()
    for encoding in ("utf-16", "utf-16-be", "utf-32"):
        response = await world.upload(world.alice, world.genesis, text.encode(encoding))
        assert response.status_code == 400, encoding
        assert "error" in response.json()
    document_cid = cid_of(world.docs[world.genesis])
    assert await world.relay.store.get_blob(world.alice.did, document_cid) is None


async def test_a_leading_utf8_bom_is_skipped(world: World) -> None:
    body = b"\xef\xbb\xbf" + doc_bytes(world.docs[world.genesis])
    assert (await world.upload(world.alice, world.genesis, body)).status_code == 200
