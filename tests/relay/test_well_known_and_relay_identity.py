"""WEB-RELAY.md "Relay Identity": the well-known document, a DID that resolves
on the relay's own proof plane, a self-signed profile artifact, and a DID that
survives restarts over the same store."""

from __future__ import annotations

import httpx

from relay import Relay, create_relay
from relay.config import PROFILE_SCHEMA
from relay.protocol import TYP_ARTIFACT, decode_jws, decode_multikey, verify_jws
from relay.version import PROTOCOL_NAME, RELAY_VERSION
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.relay_api import get_json


async def test_well_known_has_every_required_field(client: httpx.AsyncClient, relay: Relay) -> None:
    body = await get_json(client, "/.well-known/dfos-relay")
    additive = {"changesFeed", "sync", "peers"}  # our keys beside the v0.7.1 document
    assert {k: v for k, v in body.items() if k not in additive} == {
        "did": relay.did,
        "protocol": PROTOCOL_NAME,
        "version": RELAY_VERSION,
        "proof": True,
        "content": True,
        "log": True,
        "profile": relay.profile_token,
    }
    assert PROTOCOL_NAME == "dfos-web-relay"
    feed = body["changesFeed"]
    assert feed["minSeq"] == 1 and feed["headSeq"] == await relay.store.log_length()
    assert feed["transports"] == ["sse", "websocket"] and feed["epoch"]
    assert body["sync"]["negentropy"] == 1


async def test_well_known_reflects_disabled_log_and_content(store: RelayStore) -> None:
    relay = create_relay(store, content=False, log=False)
    async with relay.running(), asgi_client(relay.app, base_url="http://r") as client:
        body = await get_json(client, "/.well-known/dfos-relay")
    assert body["content"] is False and body["log"] is False and body["proof"] is True


async def test_relay_did_resolves_on_its_own_proof_plane(
    client: httpx.AsyncClient, relay: Relay
) -> None:
    identity = await get_json(client, f"/identities/{relay.did}")
    assert identity["did"] == relay.did
    assert identity["state"]["isDeleted"] is False
    assert identity["state"]["controllerKeys"]


async def test_profile_artifact_is_signed_by_the_relay_head_key(
    client: httpx.AsyncClient, relay: Relay
) -> None:
    body = await get_json(client, "/.well-known/dfos-relay")
    profile = decode_jws(body["profile"])
    assert profile.typ == TYP_ARTIFACT
    assert profile.payload["did"] == relay.did
    content = profile.payload["content"]
    assert isinstance(content, dict) and content["$schema"] == PROFILE_SCHEMA
    assert PROFILE_SCHEMA == "https://schemas.dfos.com/profile/v1"
    assert profile.kid is not None and profile.kid.startswith(relay.did + "#")
    key_id = profile.kid.split("#", 1)[1]
    identity = await get_json(client, f"/identities/{relay.did}")
    head_keys = {k["id"]: k["publicKeyMultibase"] for k in identity["state"]["controllerKeys"]}
    assert key_id in head_keys
    verify_jws(profile, decode_multikey(head_keys[key_id]))
    # The profile is an ordinary artifact of the relay's own log.
    op = await get_json(client, f"/operations/{profile.header_cid}")
    assert op["kind"] == "artifact" and op["chainId"] == relay.did


async def test_relay_did_survives_a_restart_over_the_same_store(store: RelayStore) -> None:
    first = create_relay(store)
    async with first.running():
        did, profile = first.did, first.profile_token
    second = create_relay(store)
    async with second.running():
        assert second.did == did
        assert second.profile_token == profile
        assert (await second.store.get_chain(did)) is not None
