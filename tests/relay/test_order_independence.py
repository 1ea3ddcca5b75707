"""WEB-RELAY.md "Convergence", PROTOCOL.md "Chain Validity": given the same
set of operations, a relay computes the same heads, chain states, tips and set of
sequenced operations whatever the arrival order and batch boundaries.

Hypothesis draws a workload (identities with rotations, content chains with
forks, createdAt ties, deletes and delegated edits, beacons, artifacts and
countersignatures), submits it in causal order to one relay and in a random
order with random batch boundaries to another, and compares what they serve.

Cases that are order-dependent *by the spec* are not generated:
- ops signed by an identity that is (later) deleted, content on chains whose
  creator is deleted, countersigns by a deleted witness: before the delete
  arrives they are accepted, after it they are rejected (Deletion
  Semantics). Deleted identities here have signed nothing but their own
  identity ops (others may still countersign those: that is allowed).
- two beacons per DID: a beacon older than the stored one answers
  ``duplicate`` and is never sequenced, so which beacons reach the log
  depends on arrival order (replace-on-newer); one beacon per DID here.
- two countersigns by one witness on one target: whichever arrives first is
  kept (one per witness per target).

Forged copies (the same payload, so the same CID, under a signature that
does not check, or under another identity's key) mixed into the shuffled
stream change nothing either: whichever token of a CID arrives first, the
genuine one is sequenced.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay import create_relay
from relay.protocol import decode_jws
from relay.testing.workload import Actor, ContentHandle, WorkloadBuilder
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.backends import make_store, selected_backends
from tests.support.relay_api import PAST_MS, get_json, log_cids, post
from tests.support.waiting_ops import forged_signature, signed_by

StoreFactory = Callable[[], AbstractAsyncContextManager[RelayStore]]


@pytest.fixture(params=selected_backends())
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory of fresh stores: hypothesis needs new relays per example."""

    def factory() -> AbstractAsyncContextManager[RelayStore]:
        directory = tmp_path / uuid.uuid4().hex
        directory.mkdir()
        return make_store(request.param, directory)

    return factory


class Plan:
    """Interprets drawn actions with a WorkloadBuilder, keeping the cases
    above out."""

    def __init__(self, seed: int) -> None:
        self.b = WorkloadBuilder(seed=seed, start_ms=PAST_MS)
        self.rng = random.Random(seed)
        self.actors: list[Actor] = [self.b.identity() for _ in range(3)]
        self.chains: list[ContentHandle] = []
        self.targets: list[tuple[str, str]] = [(a.head_cid, a.did) for a in self.actors]
        self.beaconed: set[str] = set()
        self.pairs: set[tuple[str, str]] = set()
        self.signed: set[str] = set()  # DIDs that signed anything but identity ops

    def live(self) -> list[Actor]:
        return [a for a in self.actors if not a.deleted]

    def apply(self, action: str) -> None:
        getattr(self, f"_{action.replace('-', '_')}")()

    def _new_identity(self) -> None:
        actor = self.b.identity()
        self.actors.append(actor)
        self.targets.append((actor.head_cid, actor.did))

    def _rotate(self) -> None:
        actor = self.rng.choice(self.live())
        self.targets.append((self.b.rotate(actor), actor.did))

    def _create(self) -> None:
        actor = self.rng.choice(self.live())
        chain = self.b.content_create(actor)
        self.chains.append(chain)
        self.signed.add(actor.did)
        self.targets.append((chain.genesis_cid, actor.did))

    def _update(self, **kwargs: Any) -> None:
        chains = [c for c in self.chains if not c.creator.deleted]
        if not chains:
            return self._create()
        chain = self.rng.choice(chains)
        cid = self.b.content_update(chain, **kwargs)
        self.targets.append((cid, chain.creator.did))

    def _fork(self) -> None:
        chains = [c for c in self.chains if not c.creator.deleted]
        if not chains:
            return self._create()
        chain = self.rng.choice(chains)
        parent = self.rng.choice(chain.ops)
        later = [ms for _, ms in chain.ops if ms > parent[1]]
        tie = self.rng.choice(later) if later and self.rng.random() < 0.6 else None
        cid = self.b.content_update(chain, parent=parent, created_ms=tie)
        self.targets.append((cid, chain.creator.did))

    def _delete_content(self) -> None:
        self._update(delete=True)

    def _delegated(self) -> None:
        chains = [c for c in self.chains if not c.creator.deleted]
        others = [a for a in self.live() if chains and a is not chains[0].creator]
        if not chains or not others:
            return self._create()
        chain = chains[0]
        delegate = self.rng.choice(others)
        cred = self.b.write_credential(chain.creator, delegate, chain.content_id)
        cid = self.b.content_update(chain, delegate, authorization=cred)
        self.signed.add(delegate.did)
        self.targets.append((cid, delegate.did))

    def _beacon(self) -> None:
        free = [a for a in self.live() if a.did not in self.beaconed]
        if free:
            actor = self.rng.choice(free)
            self.beaconed.add(actor.did)
            self.signed.add(actor.did)
            self.targets.append((self.b.beacon(actor), actor.did))

    def _artifact(self) -> None:
        actor = self.rng.choice(self.live())
        self.signed.add(actor.did)
        self.targets.append((self.b.artifact(actor), actor.did))

    def _countersign(self) -> None:
        witness = self.rng.choice(self.live())
        target, author = self.rng.choice(self.targets)
        if author == witness.did or (target, witness.did) in self.pairs:
            return
        self.pairs.add((target, witness.did))
        self.signed.add(witness.did)
        self.targets.append((self.b.countersign(witness, target), witness.did))

    def _delete_identity(self) -> None:
        idle = [a for a in self.live() if a.did not in self.signed]
        if len(idle) > 0 and len(self.live()) > 2:
            self.b.delete_identity(self.rng.choice(idle))


ACTIONS = [
    "new-identity", "rotate", "create", "update", "fork", "delete-content",
    "delegated", "beacon", "artifact", "countersign", "delete-identity",
]  # fmt: skip


async def _served(
    store_cm: AbstractAsyncContextManager[RelayStore], batches: list[list[str]], plan: Plan
) -> dict[str, Any]:
    async with store_cm as store:
        relay = create_relay(store)
        async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
            for batch in batches:
                await post(client, batch)
            own = {relay.did}
            sequenced = {
                e["cid"]
                for e in (await get_json(client, "/log?limit=1000"))["entries"]
                if e["chainId"] not in own
            }
            assert len(await log_cids(client)) == len(sequenced) + 2
            served: dict[str, Any] = {"log": sequenced}
            for actor in plan.actors:
                served[actor.did] = await get_json(client, f"/identities/{actor.did}")
                beacon = await client.get(f"/beacons/{actor.did}")
                served[f"beacon {actor.did}"] = beacon.json() if beacon.status_code == 200 else None
            for chain in plan.chains:
                served[chain.content_id] = await get_json(client, f"/content/{chain.content_id}")
            # the tips each chain keeps (schema v10), forks included
            for path in [f"/identities/{a.did}/tips" for a in plan.actors] + [
                f"/content/{c.content_id}/tips" for c in plan.chains
            ]:
                response = await client.get(path)
                served[path] = (response.status_code, response.json())
            for target, _ in plan.targets:
                response = await client.get(f"/countersignatures/{target}")
                if response.status_code == 200:
                    served[f"cs {target}"] = sorted(response.json()["countersignatures"])
            return served


def _batches(tokens: list[str], cuts: list[int]) -> list[list[str]]:
    out, start = [], 0
    for cut in sorted({c % (len(tokens) + 1) for c in cuts} | {len(tokens)}):
        if cut > start:
            out.append(tokens[start:cut])
            start = cut
    return out


def _planned(seed: int, actions: list[str]) -> Plan:
    plan = Plan(seed)
    for action in actions:
        plan.apply(action)
    return plan


async def _both_orders(
    fresh_store: StoreFactory,
    plan: Plan,
    tokens: list[str],
    order: random.Random,
    cuts: list[int],
    extra: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What one relay serves given ``tokens`` in causal order, and what
    another serves given them (and ``extra``) in ``order``, cut at ``cuts``."""
    shuffled = tokens + (extra or [])
    order.shuffle(shuffled)
    in_order = await _served(
        fresh_store(), [tokens[i : i + 100] for i in range(0, len(tokens), 100)], plan
    )
    return in_order, await _served(fresh_store(), _batches(shuffled, cuts), plan)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 2**32 - 1),
    actions=st.lists(st.sampled_from(ACTIONS), min_size=5, max_size=40),
    order=st.randoms(use_true_random=False),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
async def test_arrival_order_does_not_change_what_is_served(
    fresh_store: StoreFactory, seed: int, actions: list[str], order: random.Random, cuts: list[int]
) -> None:
    plan = _planned(seed, actions)
    tokens = list(plan.b.tokens)
    in_order, any_order = await _both_orders(fresh_store, plan, tokens, order, cuts)
    assert any_order == in_order
    # Only extensions of deleted content (which the plan may draw, and which
    # are rejected in every order) stay out of the log.
    assert in_order["log"] <= {decode_jws(t).header_cid for t in tokens}


def _forged(token: str, how: int, other: Actor) -> str:
    """A copy of ``token`` (same header and payload, so same CID) signed by a
    key that is not the signer's, or its payload signed by ``other`` under
    ``other``'s own kid."""
    decoded = decode_jws(token)
    if how % 2 == 0 or decoded.payload.get("did") == other.did:
        return forged_signature(token, 7)
    return signed_by(token, other)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, 2**32 - 1),
    actions=st.lists(st.sampled_from(ACTIONS), min_size=5, max_size=30),
    order=st.randoms(use_true_random=False),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
    forge=st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
)
async def test_forged_copies_in_any_order_do_not_change_what_is_served(
    fresh_store: StoreFactory,
    seed: int,
    actions: list[str],
    order: random.Random,
    cuts: list[int],
    forge: list[int],
) -> None:
    plan = _planned(seed, actions)
    tokens = list(plan.b.tokens)
    other = plan.actors[0]
    forged = [_forged(tokens[n % len(tokens)], n // len(tokens), other) for n in forge]
    in_order, any_order = await _both_orders(fresh_store, plan, tokens, order, cuts, forged)
    assert any_order == in_order
