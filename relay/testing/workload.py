"""Signed workloads for tests, benchmarks and demos.

``WorkloadBuilder`` signs real operations of every kind (identities with
rotations and deletes, content chains with forks, ties and delegated edits,
beacons, artifacts, countersignatures) in causal order. Keys derive from a
seed, so a workload is reproducible. Timestamps start in the past and step
forward, so no op trips the relay's future guards.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from relay.protocol import (
    DFOS_CONTENT_WRITE,
    TYP_ARTIFACT,
    TYP_BEACON,
    TYP_CONTENT,
    TYP_COUNTERSIGN,
    TYP_IDENTITY,
    Ed25519Keypair,
    cid_of,
    content_id_from_genesis_cid,
    create_credential,
    did_from_genesis_cid,
    format_timestamp,
    merkle_root,
    sign_operation,
)

DAY_MS = 24 * 3600 * 1000


def _key_json(kp: Ed25519Keypair) -> dict[str, str]:
    return {"id": kp.key_id, "type": "Multikey", "publicKeyMultibase": kp.multikey}


@dataclass
class Actor:
    """An identity the builder can sign for."""

    did: str
    keypair: Ed25519Keypair
    head_cid: str
    head_ms: int
    deleted: bool = False

    @property
    def kid(self) -> str:
        return f"{self.did}#{self.keypair.key_id}"


@dataclass
class ContentHandle:
    content_id: str
    creator: Actor
    genesis_cid: str
    head_cid: str
    head_ms: int
    ops: list[tuple[str, int]] = field(default_factory=list)  # (cid, createdAt ms)


@dataclass
class WorkloadBuilder:
    seed: int = 0
    start_ms: int = 0
    step_ms: int = 1000
    tokens: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._now = self.start_ms
        self._keys = 0

    # primitives ------------------------------------------------------------
    def tick(self) -> int:
        self._now += self.step_ms
        return self._now

    def keypair(self) -> Ed25519Keypair:
        self._keys += 1
        return Ed25519Keypair.from_seed(
            hashlib.sha256(f"dfos-workload-{self.seed}-{self._keys}".encode()).digest()
        )

    def _emit(self, typ: str, payload: dict[str, Any], kp: Ed25519Keypair, kid: str) -> str:
        signed = sign_operation(typ, payload, kp, kid)
        self.tokens.append(signed.token)
        return signed.cid

    # identities ------------------------------------------------------------
    def identity(self) -> Actor:
        kp = self.keypair()
        ms = self.tick()
        key = _key_json(kp)
        payload = {
            "version": 1,
            "type": "create",
            "authKeys": [key],
            "assertKeys": [key],
            "controllerKeys": [key],
            "createdAt": format_timestamp(ms),
        }
        cid = self._emit(TYP_IDENTITY, payload, kp, kp.key_id)
        return Actor(did_from_genesis_cid(cid), kp, cid, ms)

    def rotate(self, actor: Actor) -> str:
        new = self.keypair()
        ms = self.tick()
        key = _key_json(new)
        payload = {
            "version": 1,
            "type": "update",
            "previousOperationCID": actor.head_cid,
            "authKeys": [key],
            "assertKeys": [key],
            "controllerKeys": [key],
            "createdAt": format_timestamp(ms),
        }
        cid = self._emit(TYP_IDENTITY, payload, actor.keypair, actor.kid)
        actor.keypair, actor.head_cid, actor.head_ms = new, cid, ms
        return cid

    def delete_identity(self, actor: Actor) -> str:
        ms = self.tick()
        payload = {
            "version": 1,
            "type": "delete",
            "previousOperationCID": actor.head_cid,
            "createdAt": format_timestamp(ms),
        }
        cid = self._emit(TYP_IDENTITY, payload, actor.keypair, actor.kid)
        actor.head_cid, actor.head_ms, actor.deleted = cid, ms, True
        return cid

    # content ---------------------------------------------------------------
    def document(self, author: Actor) -> dict[str, Any]:
        return {
            "$schema": "https://schemas.dfos.com/post/v1",
            "format": "short-post",
            "title": f"post {self.rng.randrange(10**9)}",
            "body": "x" * self.rng.randrange(0, 200),
            "createdByDID": author.did,
        }

    def content_create(
        self, creator: Actor, document: dict[str, Any] | None = None
    ) -> ContentHandle:
        ms = self.tick()
        doc = document or self.document(creator)
        payload = {
            "version": 1,
            "type": "create",
            "did": creator.did,
            "documentCID": cid_of(doc),
            "baseDocumentCID": None,
            "createdAt": format_timestamp(ms),
            "note": None,
        }
        cid = self._emit(TYP_CONTENT, payload, creator.keypair, creator.kid)
        handle = ContentHandle(content_id_from_genesis_cid(cid), creator, cid, cid, ms)
        handle.ops.append((cid, ms))
        return handle

    def content_update(
        self,
        chain: ContentHandle,
        signer: Actor | None = None,
        *,
        parent: tuple[str, int] | None = None,
        created_ms: int | None = None,
        document: dict[str, Any] | None = None,
        clear: bool = False,
        delete: bool = False,
        authorization: str | None = None,
    ) -> str:
        """Extend the chain's head, or fork from ``parent`` (cid, createdAt)."""
        signer = signer or chain.creator
        parent_cid, parent_ms = parent or (chain.head_cid, chain.head_ms)
        ms = created_ms if created_ms is not None else max(self.tick(), parent_ms + 1)
        payload: dict[str, Any] = {
            "version": 1,
            "type": "delete" if delete else "update",
            "did": signer.did,
            "previousOperationCID": parent_cid,
        }
        if not delete:
            doc = None if clear else (document or self.document(signer))
            payload["documentCID"] = None if doc is None else cid_of(doc)
            payload["baseDocumentCID"] = None
        payload["createdAt"] = format_timestamp(ms)
        payload["note"] = None
        if authorization is not None:
            payload["authorization"] = authorization
        cid = self._emit(TYP_CONTENT, payload, signer.keypair, signer.kid)
        chain.ops.append((cid, ms))
        if (ms, cid) > (chain.head_ms, chain.head_cid):
            chain.head_cid, chain.head_ms = cid, ms
        return cid

    def long_chains(self, length: int) -> tuple[Actor, ContentHandle]:
        """An identity of ``length`` ops and a content chain of ``length`` ops
        it created: what a read must not hold whole, or in one go."""
        actor = self.identity()
        for _ in range(length - 1):
            self.rotate(actor)
        chain = self.content_create(actor)
        while len(chain.ops) < length:
            self.content_update(chain)
        return actor, chain

    def write_credential(
        self, creator: Actor, delegate: Actor, content_id: str | None = None
    ) -> str:
        iat = (self.start_ms // 1000) - 3600
        return create_credential(
            creator.keypair,
            creator.kid,
            creator.did,
            delegate.did,
            DFOS_CONTENT_WRITE,
            iat,
            iat + 10 * 365 * 86400,
            content_id,
        )

    # standalone ------------------------------------------------------------
    def beacon(self, actor: Actor, content_ids: list[str] | None = None) -> str:
        ms = self.tick()
        root = merkle_root(content_ids or [f"c{self.rng.randrange(10**9)}"])
        payload = {
            "version": 1,
            "type": "beacon",
            "did": actor.did,
            "merkleRoot": root,
            "createdAt": format_timestamp(ms),
        }
        return self._emit(TYP_BEACON, payload, actor.keypair, actor.kid)

    def artifact(self, actor: Actor, name: str | None = None) -> str:
        ms = self.tick()
        payload = {
            "version": 1,
            "type": "artifact",
            "did": actor.did,
            "content": {
                "$schema": "https://schemas.dfos.com/profile/v1",
                "name": name or f"artifact {self.rng.randrange(10**9)}",
            },
            "createdAt": format_timestamp(ms),
        }
        return self._emit(TYP_ARTIFACT, payload, actor.keypair, actor.kid)

    def countersign(self, witness: Actor, target_cid: str) -> str:
        ms = self.tick()
        payload = {
            "version": 1,
            "type": "countersign",
            "did": witness.did,
            "targetCID": target_cid,
            "createdAt": format_timestamp(ms),
        }
        return self._emit(TYP_COUNTERSIGN, payload, witness.keypair, witness.kid)


def mixed_workload(n_ops: int, seed: int = 0, now_ms: int | None = None) -> list[str]:
    """At least ``n_ops`` signed ops of every kind, in causal order.

    Per group of roughly 20 ops: two identities (one rotates), a content
    chain with updates, a fork and a delegated edit, a beacon, an artifact
    and countersignatures across the two identities.
    """
    import time

    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    b = WorkloadBuilder(seed=seed, start_ms=now - 30 * DAY_MS, step_ms=500)
    while len(b.tokens) < n_ops:
        alice, bob = b.identity(), b.identity()
        chain = b.content_create(alice)
        for _ in range(4):
            b.content_update(chain)
        fork_point = chain.ops[1]
        b.content_update(chain, parent=fork_point)
        cred = b.write_credential(alice, bob, chain.content_id)
        b.content_update(chain, bob, authorization=cred)
        b.rotate(alice)
        b.content_update(chain)
        b.beacon(alice, [chain.content_id])
        art = b.artifact(bob)
        b.countersign(alice, art)
        b.countersign(bob, chain.genesis_cid)
        other = b.content_create(bob)
        b.content_update(other)
        b.content_update(other, clear=True)
        b.artifact(alice)
        b.countersign(alice, other.genesis_cid)
    return b.tokens
