"""WEB-RELAY.md "Dependency Sort": one batch bootstraps a whole identity and
content lifecycle, whatever the order of the ops inside the batch."""

from __future__ import annotations

import random

import httpx
import pytest

from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, post, statuses


def _lifecycle() -> tuple[list[str], dict[str, str]]:
    b = WorkloadBuilder(seed=21, start_ms=PAST_MS)
    alice, bob = b.identity(), b.identity()
    b.rotate(alice)
    chain = b.content_create(alice)
    b.content_update(chain)
    b.content_update(chain)
    cred = b.write_credential(alice, bob, chain.content_id)
    b.content_update(chain, bob, authorization=cred)
    b.beacon(alice, [chain.content_id])
    art = b.artifact(bob)
    b.countersign(alice, art)
    b.countersign(bob, chain.genesis_cid)
    expected = {
        "alice": alice.did,
        "alice_head": alice.head_cid,
        "content": chain.content_id,
        "head": chain.head_cid,
    }
    return list(b.tokens), expected


@pytest.mark.parametrize("order", ["causal", "reversed", "shuffled-1", "shuffled-2", "shuffled-3"])
async def test_one_batch_bootstraps_everything(client: httpx.AsyncClient, order: str) -> None:
    tokens, expected = _lifecycle()
    if order == "reversed":
        tokens.reverse()
    elif order.startswith("shuffled"):
        random.Random(order).shuffle(tokens)
    results = await post(client, tokens)
    assert statuses(results) == ["new"] * len(tokens), results
    identity = await get_json(client, f"/identities/{expected['alice']}")
    assert identity["headCID"] == expected["alice_head"]
    content = await get_json(client, f"/content/{expected['content']}")
    assert content["headCID"] == expected["head"]
    assert content["state"]["length"] == 4
