"""Fixtures for the content plane: a running relay holding a small signed
world (creator, delegate, reader, stranger; two content chains) and helpers
to sign auth tokens and read credentials for it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from relay import Relay, create_relay
from relay.config import RelayConfig
from relay.protocol import (
    DFOS_CONTENT_READ,
    Ed25519Keypair,
    cid_of,
    create_auth_token,
    create_credential,
)
from relay.rules.outcomes import IngestionResult, Status
from relay.testing.workload import DAY_MS, Actor, ContentHandle, WorkloadBuilder
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client

HOUR_S = 3600
CONTENT_PLANE_LIMIT_BYTES = 64 * 1024  # small, so 413 tests stay cheap


def assert_all_new(results: list[IngestionResult]) -> None:
    bad = [(r.cid, r.error) for r in results if r.status is not Status.NEW]
    assert not bad, bad


def doc_bytes(document: dict[str, Any], *, pretty: bool = False) -> bytes:
    return json.dumps(document, indent=2 if pretty else None).encode()


@dataclass
class World:
    """A relay with signed identities and content chains already ingested.

    ``chain`` (creator alice): genesis, an update by alice, a delegated update
    by bob (write credential), then a clearing update - so its head has no
    document. ``other`` (alice): genesis committing the same document as
    ``chain``'s genesis (dedup), then an update. ``docs`` maps op CID to the
    document it commits.
    """

    relay: Relay
    client: httpx.AsyncClient
    builder: WorkloadBuilder
    alice: Actor
    bob: Actor
    carol: Actor
    mallory: Actor
    chain: ContentHandle
    other: ContentHandle
    now_s: int
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    retired: dict[str, Ed25519Keypair] = field(default_factory=dict)

    @property
    def genesis(self) -> str:
        return self.chain.genesis_cid

    @property
    def alice_update(self) -> str:
        return self.chain.ops[1][0]

    @property
    def bob_update(self) -> str:
        return self.chain.ops[2][0]

    @property
    def cleared(self) -> str:
        return self.chain.ops[3][0]

    def token(
        self,
        actor: Actor,
        *,
        aud: str | None = None,
        iat: int | None = None,
        exp: int | None = None,
        keypair: Ed25519Keypair | None = None,
    ) -> str:
        kp = keypair or actor.keypair
        issued = self.now_s - 60 if iat is None else iat
        return create_auth_token(
            kp,
            f"{actor.did}#{kp.key_id}",
            actor.did,
            self.relay.did if aud is None else aud,
            issued,
            issued + 300 if exp is None else exp,
        )

    def credential(
        self,
        issuer: Actor,
        subject: Actor,
        content_id: str | None = None,
        *,
        credential_type: str = DFOS_CONTENT_READ,
        iat: int | None = None,
        exp: int | None = None,
        keypair: Ed25519Keypair | None = None,
    ) -> str:
        kp = keypair or issuer.keypair
        issued = self.now_s - HOUR_S if iat is None else iat
        return create_credential(
            kp,
            f"{issuer.did}#{kp.key_id}",
            issuer.did,
            subject.did,
            credential_type,
            issued,
            issued + 2 * HOUR_S if exp is None else exp,
            content_id,
        )

    def headers(self, actor: Actor, credential: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token(actor)}"}
        if credential is not None:
            headers["X-Credential"] = credential
        return headers

    async def upload(
        self,
        actor: Actor,
        op_cid: str,
        body: bytes | None = None,
        chain: ContentHandle | None = None,
    ) -> httpx.Response:
        content_id = (chain or self.chain).content_id
        data = doc_bytes(self.docs[op_cid]) if body is None else body
        return await self.client.put(
            f"/content/{content_id}/blob/{op_cid}", content=data, headers=self.headers(actor)
        )

    async def download(
        self,
        actor: Actor,
        ref: str | None = None,
        credential: str | None = None,
        chain: ContentHandle | None = None,
    ) -> httpx.Response:
        content_id = (chain or self.chain).content_id
        path = f"/content/{content_id}/blob" + ("" if ref is None else f"/{ref}")
        return await self.client.get(path, headers=self.headers(actor, credential))


def build_world_tokens(now_ms: int) -> tuple[WorkloadBuilder, dict[str, Any]]:
    b = WorkloadBuilder(seed=7, start_ms=now_ms - 2 * DAY_MS)
    alice, bob, carol, mallory = b.identity(), b.identity(), b.identity(), b.identity()
    shared_doc = b.document(alice)
    chain = b.content_create(alice, shared_doc)
    docs = {chain.genesis_cid: shared_doc}
    doc = b.document(alice)
    docs[b.content_update(chain, document=doc)] = doc
    doc = b.document(bob)
    grant = b.write_credential(alice, bob, chain.content_id)
    docs[b.content_update(chain, bob, document=doc, authorization=grant)] = doc
    b.content_update(chain, clear=True)
    other = b.content_create(alice, shared_doc)
    docs[other.genesis_cid] = shared_doc
    doc = b.document(alice)
    docs[b.content_update(other, document=doc)] = doc
    for document in docs.values():
        assert cid_of(document)  # every committed document is encodable
    parts = {"alice": alice, "bob": bob, "carol": carol, "mallory": mallory}
    return b, {**parts, "chain": chain, "other": other, "docs": docs}


async def start_world(relay: Relay, client: httpx.AsyncClient) -> World:
    now_ms = relay.clock()
    builder, parts = build_world_tokens(now_ms)
    assert_all_new(await relay.ingest(builder.tokens))
    return World(relay=relay, client=client, builder=builder, now_s=now_ms // 1000, **parts)


@pytest.fixture
async def content_relay(store: RelayStore) -> AsyncIterator[Relay]:
    relay = create_relay(store, config=RelayConfig(max_blob_bytes=CONTENT_PLANE_LIMIT_BYTES))
    async with relay.running():
        yield relay


@pytest.fixture
async def world(content_relay: Relay) -> AsyncIterator[World]:
    async with asgi_client(content_relay.app) as client:
        yield await start_world(content_relay, client)


async def ingest_more(world: World, since: int) -> None:
    """Ingest the builder's tokens signed after index ``since``."""
    assert_all_new(await world.relay.ingest(world.builder.tokens[since:]))
