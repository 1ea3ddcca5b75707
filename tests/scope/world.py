"""A small world for scope tests: a content chain whose closure reaches
three other identities, beside ops the scope must leave out."""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from relay.scope import Scope
from relay.testing.workload import Actor, ContentHandle, WorkloadBuilder
from stores.base import RelayStore
from tests.support.relay_api import PAST_MS


@dataclass
class World:
    builder: WorkloadBuilder
    creator: Actor  # creates the content chain
    delegate: Actor  # writes to it with the creator's credential
    witness: Actor  # countersigns its genesis
    outsider: Actor  # unrelated
    chain: ContentHandle
    delegate_op: str = ""
    countersign: str = ""
    creator_extras: list[str] = field(default_factory=list)  # beacon, artifact of the creator
    outsider_ops: list[str] = field(default_factory=list)

    @property
    def tokens(self) -> list[str]:
        return self.builder.tokens


def build_world(seed: int = 7) -> World:
    """In log order: identities (delegate and witness first, long before
    anything needs them), the outsider's ops, the chain, then the
    delegate's write and the countersignature that pull them into scope."""
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    delegate = b.identity()
    witness = b.identity()
    outsider = b.identity()
    b.beacon(outsider)
    other = b.content_create(outsider)
    b.content_update(other)
    creator = b.identity()
    chain = b.content_create(creator)
    beacon = b.beacon(creator)
    artifact = b.artifact(creator)
    b.content_update(chain)
    credential = b.write_credential(creator, delegate, chain.content_id)
    delegate_op = b.content_update(chain, delegate, authorization=credential)
    countersign = b.countersign(witness, chain.genesis_cid)
    b.content_update(other)
    world = World(b, creator, delegate, witness, outsider, chain, delegate_op, countersign)
    world.creator_extras = [beacon, artifact]
    return world


def expected_closure(world: World) -> set[tuple[str, str]]:
    """(kind, chainId) of every op the content chain's scope holds."""
    return {
        ("identity-op", world.creator.did),
        ("identity-op", world.delegate.did),
        ("identity-op", world.witness.did),
        ("content-op", world.chain.content_id),
        ("countersign", world.chain.genesis_cid),
    }


def random_world(seed: int) -> list[str]:
    """Identities, content chains with co-authors (credentials), forks of
    nothing, beacons, artifacts and countersignatures, in causal order."""
    rng = random.Random(seed)
    b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
    people = [b.identity() for _ in range(rng.randint(3, 6))]
    chains: list[ContentHandle] = []
    for _ in range(rng.randint(6, 14)):
        roll = rng.random()
        if roll < 0.3 or not chains:
            chains.append(b.content_create(rng.choice(people)))
        elif roll < 0.55:
            chain = rng.choice(chains)
            author = rng.choice(people)
            if author is chain.creator:
                b.content_update(chain)
            else:
                grant = b.write_credential(chain.creator, author, chain.content_id)
                b.content_update(chain, author, authorization=grant)
        elif roll < 0.7:
            chain = rng.choice(chains)
            target = rng.choice(chain.ops)[0]
            witness = rng.choice([p for p in people if p is not chain.creator])
            b.countersign(witness, target)
        elif roll < 0.8:
            b.beacon(rng.choice(people))
        elif roll < 0.9:
            b.artifact(rng.choice(people))
        else:
            people.append(b.identity())
    return b.tokens


async def picked_scope(store: RelayStore, picks: list[int]) -> Scope:
    """A scope of the chains of ``store``'s log that ``picks`` index (mod
    their count, in chain id order): random worlds name chains this way."""
    head = await store.log_length()
    entries = await store.read_seq_range(0, head, head)
    ids = sorted({e.chain_id for e in entries if e.kind in ("identity-op", "content-op")})
    return Scope.of(ids[p % len(ids)] for p in picks)


def remove_identity(db: Path, did: str) -> None:
    """Lose a closure member on the serving side (a partial restore, say):
    the identity chain's rows, as if never stored."""
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM ops WHERE chain_id = ? AND kind = 'identity-op'", (did,))
        conn.execute("DELETE FROM chains WHERE chain_id = ?", (did,))
        conn.execute("DELETE FROM identity_keys WHERE did = ?", (did,))
