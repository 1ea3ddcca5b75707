"""A scoped subscription (``scope=``) carries the scope's dependency
closure: a closure op is sent before its dependants, even when the closure
grows after the subscription's start position (then the op comes late,
flagged ``closure``, with a token that resumes just before its dependant).
Over SSE and WebSocket through a real hypercorn, on every store."""

from __future__ import annotations

import json
from typing import Any

import websockets

from tests.scope.world import build_world, expected_closure

from .conftest import Served, read_sse, ws_frames_until

# world.tokens: ..., chain update (index 10), delegate's write, countersignature, outsider op
BEFORE_GROWTH = 11


async def test_a_scoped_tail_from_zero_serves_exactly_the_closure(served: Served) -> None:
    world = build_world(seed=21)
    await served.relay.ingest(world.tokens)
    events = await read_sse(served.url, f"since=0&scope={world.chain.content_id}")
    ops = [e[1] for e in events if e[0] == "op"]
    assert {(op["kind"], op["chainId"]) for op in ops} == expected_closure(world)
    # the stream is a function of the log alone: the closure grows as the
    # scan meets dependants, so from zero every closure identity comes late,
    # just ahead of the first op that needs it
    first_needed = {op["chainId"]: i for i, op in reversed(list(enumerate(ops)))}
    late = [op for op in ops if op.get("closure")]
    assert {op["chainId"] for op in late} == {
        world.creator.did, world.delegate.did, world.witness.did,
    }  # fmt: skip
    for op in late:
        assert ops[first_needed[op["chainId"]] + 1]["kind"] in ("content-op", "countersign")
    in_order = [op["seq"] for op in ops if not op.get("closure")]
    assert in_order == sorted(in_order)
    assert events[-1][0] == "eose"


async def test_a_closure_that_grows_mid_stream_is_sent_before_its_dependant(
    served: Served,
) -> None:
    world = build_world(seed=22)
    await served.relay.ingest(world.tokens[:BEFORE_GROWTH])
    start = await served.relay.store.log_length()
    await served.relay.ingest(world.tokens[BEFORE_GROWTH:])
    events = await read_sse(served.url, f"since={start}&scope={world.chain.content_id}")
    ops = [e[1] for e in events if e[0] == "op"]
    order = [(op["kind"], op["chainId"], bool(op.get("closure"))) for op in ops]
    assert order == [
        ("identity-op", world.delegate.did, True),
        ("content-op", world.chain.content_id, False),
        ("identity-op", world.witness.did, True),
        ("countersign", world.chain.genesis_cid, False),
    ]
    write, countersign = ops[1], ops[3]
    assert write["cid"] == world.delegate_op and countersign["cid"] == world.countersign
    epoch = events[0][1]["epoch"]
    assert ops[0]["token"] == f"{epoch}.{write['seq'] - 1}"  # resumes before its dependant
    assert ops[0]["seq"] < start  # sequenced long before, out of scope until now
    assert ops[2]["token"] == f"{epoch}.{countersign['seq'] - 1}"
    # resuming from a late op's token serves the dependant again, closure first
    again = await read_sse(served.url, f"since={ops[0]['token']}&scope={world.chain.content_id}")
    again_ops = [e[1]["cid"] for e in again if e[0] == "op"]
    assert again_ops[:2] == [ops[0]["cid"], write["cid"]]


async def test_a_scoped_bootstrap_sends_closure_identities_first(served: Served) -> None:
    world = build_world(seed=23)
    await served.relay.ingest(world.tokens)
    events = await read_sse(served.url, f"mode=bootstrap&scope={world.chain.content_id}")
    items: list[dict[str, Any]] = [e[1] for e in events if e[0] == "snapshot"]
    kinds = [item["kind"] for item in items]
    assert kinds == ["identity", "identity", "identity", "content", "countersign"]
    assert {item["chainId"] for item in items[:3]} == {
        world.creator.did, world.delegate.did, world.witness.did,
    }  # fmt: skip
    assert items[3]["chainId"] == world.chain.content_id
    assert items[3]["headCID"] == world.chain.head_cid


async def test_a_websocket_subscription_takes_the_scope_as_a_list(served: Served) -> None:
    world = build_world(seed=24)
    await served.relay.ingest(world.tokens)
    async with websockets.connect(served.ws_url) as ws:
        scope = [world.chain.content_id, world.outsider.did]
        await ws.send(json.dumps(["CHANGES", "s", {"since": 0, "scope": scope}]))
        frames = await ws_frames_until(ws, "s", "EOSE")
        chains = {frame[4]["chainId"] for frame in frames if frame[2] == "EVENT"}
        assert {world.chain.content_id, world.outsider.did} <= chains
        await ws.send(json.dumps(["CHANGES", "bad", {"scope": ["x"], "kinds": ["beacon"]}]))
        [err] = await ws_frames_until(ws, "bad", "ERR")
        assert "scope" in json.dumps(err)
