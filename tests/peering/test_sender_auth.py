"""The receiver's sender check (``relay.peering.sender_auth``): one
verification per token, a cached token only for its issuer and only until
it expires, an unknown sender identity read from its peer at most once per
retry interval, and every unproven push counted by reason."""

from __future__ import annotations

from relay.peering.sender_auth import SENDER_IDENTITY_RETRY_S, SenderAuth
from relay.protocol import IdentityState
from tests.peering.test_sender_proof import (
    GENESIS,
    NOW,
    OTHER,
    OTHER_KEY,
    RECEIVER,
    SENDER,
    proof,
)


class World:
    """The identities the receiver holds, the reads it makes, the time."""

    def __init__(self, held: list[IdentityState]) -> None:
        self.held = {s.did: s for s in held}
        self.loads = 0
        self.fetches: list[tuple[str, str]] = []
        self.now = float(NOW)
        self.ticks = 0.0  # monotonic seconds
        self.reasons: list[str] = []
        self.serves: dict[str, list[str]] = {}  # identity logs the peer serves

    async def load(self, did: str) -> IdentityState | None:
        self.loads += 1
        return self.held.get(did)

    async def fetch(self, url: str, did: str) -> list[str] | None:
        self.fetches.append((url, did))
        return self.serves.get(did)

    def auth(self) -> SenderAuth:
        auth = SenderAuth(
            self.load, self.fetch, 1.0, clock_s=lambda: self.now, monotonic=lambda: self.ticks
        )
        auth.listeners.append(self.reasons.append)
        return auth


async def test_a_token_is_verified_once_then_answered_from_the_cache() -> None:
    world = World([SENDER])
    auth = world.auth()
    token = proof()
    for _ in range(50):
        assert await auth.proven(SENDER.did, token, RECEIVER.did, "http://a.test")
    assert (auth.verifications, world.loads, auth.proven_pushes) == (1, 1, 50)


async def test_a_cached_token_proves_only_its_issuer_and_only_until_it_expires() -> None:
    world = World([SENDER, OTHER])
    auth = world.auth()
    token = proof(exp=NOW + 100)
    assert await auth.proven(SENDER.did, token, RECEIVER.did, None)
    assert not await auth.proven(OTHER.did, token, RECEIVER.did, None)  # replayed as another's
    world.now = NOW + 100
    assert not await auth.proven(SENDER.did, token, RECEIVER.did, None)  # expired
    assert world.reasons == ["invalid", "invalid"]


async def test_a_push_without_a_proof_is_counted_missing() -> None:
    world = World([SENDER])
    auth = world.auth()
    assert not await auth.proven(SENDER.did, None, RECEIVER.did, "http://a.test")
    assert world.reasons == ["missing"] and world.loads == 0


async def test_an_unknown_sender_identity_is_read_from_its_peer_at_most_once_per_interval() -> None:
    world = World([])
    auth = world.auth()
    token = proof()
    # the peer does not serve it: the push is a client's, and no read again soon
    assert not await auth.proven(SENDER.did, token, RECEIVER.did, "http://a.test")
    assert not await auth.proven(SENDER.did, token, RECEIVER.did, "http://a.test")
    assert world.fetches == [("http://a.test", SENDER.did)]
    assert world.reasons == ["unknown_identity", "unknown_identity"]
    # a sender we cannot place (no peer URL) is never read
    other = proof(keypair=OTHER_KEY, iss=OTHER.did)
    assert not await auth.proven(OTHER.did, other, RECEIVER.did, None)
    assert len(world.fetches) == 1
    # once the interval passed, it is read again; now the peer serves it
    world.ticks += SENDER_IDENTITY_RETRY_S
    world.serves[SENDER.did] = [GENESIS[SENDER.did]]
    assert await auth.proven(SENDER.did, token, RECEIVER.did, "http://a.test")
    assert len(world.fetches) == 2
    # the state read is used for a while (a new token needs no new read), not stored
    assert await auth.proven(SENDER.did, proof(exp=NOW + 299), RECEIVER.did, "http://a.test")
    assert len(world.fetches) == 2 and world.held == {}


async def test_an_identity_log_a_peer_serves_for_another_did_proves_nothing() -> None:
    world = World([])
    auth = world.auth()
    world.serves[SENDER.did] = [GENESIS[OTHER.did]]  # a valid chain, of another DID
    assert not await auth.proven(SENDER.did, proof(), RECEIVER.did, "http://a.test")
    assert world.reasons == ["unknown_identity"]
