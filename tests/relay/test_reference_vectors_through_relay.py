"""The upstream reference vectors (/work/shared/reference/vectors) ingested
through a relay: the served state equals each vector's ``expected``.

The vectors are dated 2026-03, in the past of any real clock, so the future
guards do not interfere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.relay_api import get_json, post, statuses

VECTORS = Path("/work/shared/reference/vectors")
if not VECTORS.is_dir():  # pragma: no cover - the vectors live outside the repo
    pytest.skip("reference vectors not available", allow_module_level=True)


def _vector(name: str) -> dict[str, Any]:
    return json.loads((VECTORS / f"{name}.json").read_text())  # type: ignore[no-any-return]


ROTATION = _vector("identity-rotation")


@pytest.mark.parametrize("name", ["identity-rotation", "identity-delete"])
async def test_identity_vector(client: httpx.AsyncClient, name: str) -> None:
    vector = _vector(name)
    assert statuses(await post(client, vector["chain"])) == ["new"] * len(vector["chain"])
    expected = vector["expected"]
    body = await get_json(client, f"/identities/{expected['did']}")
    for key, value in expected.items():
        assert body["state"][key] == value, key


@pytest.mark.parametrize("name", ["content-lifecycle", "content-delete"])
async def test_content_vector(client: httpx.AsyncClient, name: str) -> None:
    vector = _vector(name)
    # The content vectors are signed by the rotated key of the rotation vector's DID.
    tokens = ROTATION["chain"] + vector["chain"]
    assert statuses(await post(client, list(reversed(tokens)))) == ["new"] * len(tokens)
    expected = vector["expected"]
    body = await get_json(client, f"/content/{expected['contentId']}")
    for key, value in expected.items():
        assert body["state"][key] == value, key
    assert body["headCID"] == body["state"]["headCID"]


async def test_beacon_vector(client: httpx.AsyncClient) -> None:
    vector = _vector("beacon")
    expected = vector["expected"]
    await post(client, ROTATION["chain"])
    [result] = await post(client, [vector["controllerJws"]])
    assert result["status"] == "new" and result["cid"] == expected["beaconCID"]
    body = await get_json(client, f"/beacons/{expected['did']}")
    assert body["beaconCID"] == expected["beaconCID"]
    assert body["payload"]["merkleRoot"] == expected["merkleRoot"]
    assert body["payload"]["createdAt"] == expected["createdAt"]


@pytest.mark.parametrize("first", ["controllerJws", "witnessJws"])
async def test_both_tokens_of_the_beacon_vector(client: httpx.AsyncClient, first: str) -> None:
    """The vector signs one payload with two of the DID's keys: whichever
    comes second changes nothing and answers ``duplicate``, "even if the CID
    differs" (WEB-RELAY.md, Ingestion Statuses), so surely when it does not."""
    vector = _vector("beacon")
    second = "witnessJws" if first == "controllerJws" else "controllerJws"
    await post(client, ROTATION["chain"])
    assert statuses(await post(client, [vector[first]])) == ["new"]
    [again] = await post(client, [vector[second]])
    assert again["status"] == "duplicate" and again["cid"] == vector["expected"]["beaconCID"]
    body = await get_json(client, f"/beacons/{vector['expected']['did']}")
    assert body["beaconCID"] == vector["expected"]["beaconCID"]
