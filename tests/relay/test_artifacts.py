"""WEB-RELAY.md "Artifacts": the CBOR payload is limited to 16384 bytes (a
protocol constant), ``content.$schema`` is required, artifacts are immutable
and served like any operation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from relay.protocol import (
    ARTIFACT_MAX_CBOR_BYTES,
    TYP_ARTIFACT,
    encode_canonical,
    format_timestamp,
    sign_operation,
)
from relay.testing.workload import Actor, WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, post, statuses


def _artifact(actor: Actor, content: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    payload = {
        "version": 1,
        "type": "artifact",
        "did": actor.did,
        "content": content,
        "createdAt": format_timestamp(PAST_MS + 60_000),
    }
    return sign_operation(TYP_ARTIFACT, payload, actor.keypair, actor.kid).token, payload


def _sized(actor: Actor, size: int) -> tuple[str, dict[str, Any]]:
    """An artifact whose canonical CBOR payload is exactly ``size`` bytes."""
    content = {"$schema": "https://schemas.dfos.com/profile/v1", "name": "x", "pad": ""}
    _, payload = _artifact(actor, content)
    base = len(encode_canonical(payload))
    pad = size - base
    for extra in range(pad, pad - 4, -1):
        content["pad"] = "p" * extra
        token, payload = _artifact(actor, content)
        if len(encode_canonical(payload)) == size:
            return token, payload
    raise AssertionError("could not hit the exact size")


@pytest.mark.parametrize(
    ("size", "status"),
    [(ARTIFACT_MAX_CBOR_BYTES, "new"), (ARTIFACT_MAX_CBOR_BYTES + 1, "rejected")],
    ids=["exactly-16384", "16385"],
)
async def test_cbor_size_limit(client: httpx.AsyncClient, size: int, status: str) -> None:
    b = WorkloadBuilder(seed=81, start_ms=PAST_MS)
    alice = b.identity()
    token, payload = _sized(alice, size)
    assert len(encode_canonical(payload)) == size
    results = await post(client, [b.tokens[0], token])
    assert statuses(results) == ["new", status]
    assert ARTIFACT_MAX_CBOR_BYTES == 16384


@pytest.mark.parametrize(
    "content",
    [{"name": "no schema"}, {"$schema": 42, "name": "x"}],
    ids=["missing-schema", "non-string-schema"],
)
async def test_schema_is_required(client: httpx.AsyncClient, content: dict[str, Any]) -> None:
    b = WorkloadBuilder(seed=82, start_ms=PAST_MS)
    alice = b.identity()
    token, _ = _artifact(alice, content)
    results = await post(client, [b.tokens[0], token])
    assert statuses(results) == ["new", "rejected"]


async def test_artifact_is_served_and_immutable(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=83, start_ms=PAST_MS)
    alice = b.identity()
    cid = b.artifact(alice, "hello")
    assert statuses(await post(client, b.tokens)) == ["new", "new"]
    assert statuses(await post(client, b.tokens[1:])) == ["duplicate"]
    op = await get_json(client, f"/operations/{cid}")
    assert op == {
        "cid": cid,
        "jwsToken": b.tokens[1],
        "chainType": "artifact",
        "chainId": alice.did,
        "kind": "artifact",
    }
