"""WEB-RELAY.md "Ingestion Statuses" (beacons): replace-on-newer; an older or
equal createdAt answers ``duplicate`` and changes nothing, another token of
the stored beacon too once its signature checks; GET /beacons/{did}."""

from __future__ import annotations

import httpx

from relay.protocol import decode_jws
from relay.testing.workload import WorkloadBuilder
from tests.support.relay_api import PAST_MS, get_json, post, statuses
from tests.support.waiting_ops import forged_signature


async def test_newer_beacon_replaces_older_and_equal_do_not(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=71, start_ms=PAST_MS)
    alice = b.identity()
    first = b.beacon(alice, ["c1"])
    second = b.beacon(alice, ["c2"])
    genesis, t1, t2 = b.tokens
    assert statuses(await post(client, [genesis, t2])) == ["new", "new"]
    [older] = await post(client, [t1])
    assert older["status"] == "duplicate" and older["cid"] == first
    body = await get_json(client, f"/beacons/{alice.did}")
    assert body["beaconCID"] == second
    # Equal createdAt, different root: still no state change.
    b._now = (await _created_ms(t2)) - b.step_ms
    b.beacon(alice, ["c3"])
    [equal] = await post(client, b.tokens[-1:])
    assert equal["status"] == "duplicate"
    assert (await get_json(client, f"/beacons/{alice.did}"))["beaconCID"] == second
    b.beacon(alice, ["c4"])
    [newer] = await post(client, b.tokens[-1:])
    assert newer["status"] == "new"
    assert (await get_json(client, f"/beacons/{alice.did}"))["beaconCID"] == newer["cid"]


async def test_another_token_of_a_stored_beacon_must_still_verify(
    client: httpx.AsyncClient,
) -> None:
    b = WorkloadBuilder(seed=72, start_ms=PAST_MS)
    alice = b.identity()
    b.beacon(alice, ["c1"])
    genesis, beacon = b.tokens
    assert statuses(await post(client, [genesis, beacon])) == ["new", "new"]
    [result] = await post(client, [forged_signature(beacon)])
    assert result["status"] == "rejected" and result["error"] == "invalid signature"
    assert (await get_json(client, f"/beacons/{alice.did}"))["beaconCID"] == result["cid"]


async def _created_ms(token: str) -> int:
    from relay.protocol import parse_timestamp

    return parse_timestamp(str(decode_jws(token).payload["createdAt"]))


async def test_beacon_route_shape(client: httpx.AsyncClient) -> None:
    b = WorkloadBuilder(seed=72, start_ms=PAST_MS)
    alice = b.identity()
    cid = b.beacon(alice)
    await post(client, b.tokens)
    body = await get_json(client, f"/beacons/{alice.did}")
    assert body == {
        "did": alice.did,
        "jwsToken": b.tokens[1],
        "beaconCID": cid,
        "payload": decode_jws(b.tokens[1]).payload,
    }
    assert body["payload"]["type"] == "beacon" and body["payload"]["merkleRoot"]


async def test_unknown_beacon_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/beacons/did:dfos:nobodyhere000000000000")
    assert response.status_code == 404 and "error" in response.json()
