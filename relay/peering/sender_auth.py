"""Who pushed: the receiving side of sender proofs (``relay.peering.sender_proof``).

``SenderAuth.proven(sender_did, proof, peer_url)`` says whether a POST
/operations naming ``sender_did`` is that relay's push. Only then does
peering treat it as the peer's (echo notes, fan-out hops); otherwise the
push is a client's. A push is never refused for its proof: the ops are
self-certifying and are ingested either way.

- Verified tokens are cached (bounded, least recently used out) with their
  issuer and expiry, so a peer reusing its token costs one verification
  and one identity read per token, not per push. A cached token stays
  accepted until it expires even if its identity is deleted or its key
  rotated meanwhile (at most ``SENDER_PROOF_MAX_LIFETIME_S``).
- A sender whose identity this relay does not hold yet (a fresh pairing:
  its identity ops were gossiped before we listened) has its identity log
  read from the peer URL its DID maps to, at most once per
  ``SENDER_IDENTITY_RETRY_S`` per DID and within the read-through
  deadline. The chain is verified here (a DID is the hash of its genesis,
  so no peer can substitute another identity) and its head state kept in
  memory for ``SENDER_IDENTITY_TTL_S`` (bounded), not written to the store:
  what the store holds stays what peering pulled or was pushed (a scoped
  mirror stays its scope). The store's state, once it has one, wins. If
  the read fails the pushes are a client's until it succeeds or the
  identity arrives by gossip, sync or reconciliation.
- Every unproven push is counted by reason (``missing``, ``invalid``,
  ``unknown_identity``) for the listeners (the relay's metrics) and logged
  once per sender DID as a warning, at debug afterwards.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from relay.protocol import IdentityState, ProtocolError, verify_identity_chain

from .sender_proof import ProvenSender, SenderProofError, check_sender_proof

log = logging.getLogger("dfos_relay.peering")

SENDER_PROOF_CACHE = 1024  # verified tokens remembered (~0.5 KB each)
SENDER_IDENTITY_RETRY_S = 30.0  # between reads of one sender's identity from its peer
SENDER_IDENTITY_TTL_S = 300.0  # a state read from a peer is used this long, then read again
SENDER_IDENTITIES_READ_MAX = 256  # such states kept (only peers' DIDs are read)
SENDER_LOGGED_MAX = 4096  # sender DIDs whose first unproven push was logged
SENDER_NAME_MAX = 128  # characters of a claimed sender DID kept and logged

REASONS = ("missing", "invalid", "unknown_identity")

LoadIdentity = Callable[[str], Coroutine[Any, Any, IdentityState | None]]
# (peer URL, DID): that identity's log as the peer serves it (None: it has none)
FetchIdentity = Callable[[str, str], Coroutine[Any, Any, list[str] | None]]
Unproven = Callable[[str], None]  # listener: one unproven push, by reason


class SenderAuth:
    def __init__(
        self,
        load_identity: LoadIdentity,
        fetch_identity: FetchIdentity,
        fetch_deadline_s: float,
        clock_s: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load_identity
        self._fetch = fetch_identity
        self._deadline_s = fetch_deadline_s
        self._clock_s = clock_s  # proofs' iat and exp: wall-clock seconds
        self._monotonic = monotonic  # retry intervals
        self._verified: dict[str, ProvenSender] = {}  # token -> who, until when
        self._fetched_at: dict[str, float] = {}  # DID -> monotonic time of the last read
        self._read: dict[str, tuple[IdentityState, float]] = {}  # DID -> (state, read at)
        self._inflight: dict[str, asyncio.Task[IdentityState | None]] = {}
        self._logged: set[str] = set()
        self.listeners: list[Unproven] = []
        self.verifications = 0  # tokens verified (not answered from the cache)
        self.proven_pushes = 0

    async def proven(
        self, sender_did: str, proof: str | None, audience: str | None, peer_url: str | None
    ) -> bool:
        """Is this push from ``sender_did``? ``audience``: our DID (None:
        not known yet, nothing is proven); ``peer_url``: where the DID's
        relay is peered with us (None: not a peer we know)."""
        now_s = int(self._clock_s())
        if proof is None:
            return self._unproven(sender_did, "missing", "no sender proof")
        known = self._recall(proof)
        if known is not None and known.did == sender_did and known.expires_s > now_s:
            self.proven_pushes += 1
            return True
        if audience is None:
            return self._unproven(sender_did, "invalid", "our DID is not known yet")
        identity = await self._identity(sender_did, peer_url)
        if identity is None:
            return self._unproven(sender_did, "unknown_identity", "its identity is not held here")
        self.verifications += 1
        try:
            verified = check_sender_proof(proof, sender_did, identity, audience, now_s)
        except SenderProofError as exc:
            return self._unproven(sender_did, "invalid", str(exc))
        self._remember(proof, verified)
        self.proven_pushes += 1
        return True

    async def stop(self) -> None:
        for task in self._inflight.values():
            task.cancel()
        await asyncio.gather(*self._inflight.values(), return_exceptions=True)
        self._inflight.clear()

    def _recall(self, token: str) -> ProvenSender | None:
        known = self._verified.pop(token, None)
        if known is not None:
            self._verified[token] = known  # now the most recent
        return known

    def _remember(self, token: str, verified: ProvenSender) -> None:
        self._verified[token] = verified
        while len(self._verified) > SENDER_PROOF_CACHE:
            del self._verified[next(iter(self._verified))]

    async def _identity(self, did: str, peer_url: str | None) -> IdentityState | None:
        """``did``'s head state: the store's, else one read from its peer."""
        state = await self._load(did)
        if state is not None:
            self._read.pop(did, None)
            return state
        held = self._read.get(did)
        if held is not None and self._monotonic() - held[1] < SENDER_IDENTITY_TTL_S:
            return held[0]
        if peer_url is None:
            return None
        task = self._inflight.get(did)
        if task is None:
            last = self._fetched_at.get(did)
            if last is not None and self._monotonic() - last < SENDER_IDENTITY_RETRY_S:
                return None
            self._fetched_at[did] = self._monotonic()
            task = asyncio.create_task(self._read_from(peer_url, did), name=f"sender {did}")
            self._inflight[did] = task
            task.add_done_callback(lambda t: self._done(did, t))
        try:
            return await asyncio.wait_for(asyncio.shield(task), self._deadline_s)
        except TimeoutError:
            return None
        except Exception:  # logged by ``_done``; the push is a client's
            return None

    async def _read_from(self, peer_url: str, did: str) -> IdentityState | None:
        tokens = await self._fetch(peer_url, did)
        if not tokens:
            return None
        try:
            chain = verify_identity_chain(tokens, int(self._clock_s() * 1000))
        except ProtocolError as exc:
            log.warning("peer %s: its identity log of %s does not verify: %s", peer_url, did, exc)
            return None
        if chain.did != did:
            log.warning("peer %s: served the identity %s for %s", peer_url, chain.did, did)
            return None
        self._read[did] = (chain.state, self._monotonic())
        while len(self._read) > SENDER_IDENTITIES_READ_MAX:
            del self._read[next(iter(self._read))]
        return chain.state

    def _done(self, did: str, task: asyncio.Task[IdentityState | None]) -> None:
        if self._inflight.get(did) is task:
            del self._inflight[did]
        if not task.cancelled() and task.exception() is not None:
            log.warning("reading the identity of sender %s failed: %r", did, task.exception())

    def _unproven(self, sender_did: str, reason: str, detail: str) -> bool:
        for listener in self.listeners:
            listener(reason)
        name = sender_did[:SENDER_NAME_MAX]  # the header is anyone's text: bounded
        if name in self._logged:
            log.debug("push naming sender %r taken as a client's: %s", name, detail)
        else:
            if len(self._logged) >= SENDER_LOGGED_MAX:
                self._logged.clear()
            self._logged.add(name)
            log.warning(
                "push naming sender %r taken as a client's (%s): %s; "
                "later ones naming it are logged at debug",
                name, reason, detail,
            )  # fmt: skip
        return False
