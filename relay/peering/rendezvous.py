"""Rendezvous fan-out rules (issue 15, "A large mesh: rendezvous fan-out").

Pure and deterministic: every relay that knows the origin's peer list
computes the same ranking, the same coordinators and the same shares for an
op, so a coordinator needs nothing from the origin but the op and that list.

- ``rank``: peers by HMAC-SHA256(key = peer DID utf-8, message =
  chainId || cid utf-8), highest first; equal digests (never seen in
  practice) fall back to the DID's code points.
- ``coordinator_count(P)``: ceil(log2 P), clamped to 2..5 (and never more
  than P itself).
- ``shares``: the peers after the top k, dealt round-robin in rank order to
  the k coordinators; together the shares partition the remaining peers.

Not checked here: that a DID is well formed, or that the list has no
duplicates (callers pass a deduplicated list; duplicates are dropped).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Iterable, Sequence

MIN_COORDINATORS = 2
MAX_COORDINATORS = 5


def score(peer_did: str, chain_id: str, cid: str) -> bytes:
    """HMAC-SHA256 keyed by the peer's DID over ``chainId || cid``."""
    message = (chain_id + cid).encode("utf-8")
    return hmac.new(peer_did.encode("utf-8"), message, hashlib.sha256).digest()


def rank(peer_dids: Iterable[str], chain_id: str, cid: str) -> list[str]:
    """Peers ordered by descending score; ties broken by DID ascending."""
    unique = dict.fromkeys(peer_dids)
    scored = [(score(did, chain_id, cid), did) for did in unique]
    # descending score, ascending DID: sort by DID first, then stably by score
    scored.sort(key=lambda item: item[1])
    scored.sort(key=lambda item: item[0], reverse=True)
    return [did for _, did in scored]


def coordinator_count(peer_count: int) -> int:
    """k = clamp(ceil(log2 P), 2, 5), at most P (0 for no peers)."""
    if peer_count <= 0:
        return 0
    k = math.ceil(math.log2(peer_count)) if peer_count > 1 else 1
    return min(peer_count, max(MIN_COORDINATORS, min(MAX_COORDINATORS, k)))


def coordinators(ranked: Sequence[str]) -> list[str]:
    """The top k of a ranked list."""
    return list(ranked[: coordinator_count(len(ranked))])


def shares(ranked: Sequence[str]) -> dict[str, list[str]]:
    """Coordinator DID -> the remaining peers it forwards to.

    Remaining peer i (in rank order, after the top k) goes to coordinator
    i mod k, so the shares are disjoint, cover every remaining peer and
    differ in size by at most one.
    """
    k = coordinator_count(len(ranked))
    top = list(ranked[:k])
    out: dict[str, list[str]] = {did: [] for did in top}
    for i, did in enumerate(ranked[k:]):
        out[top[i % k]].append(did)
    return out


def share_of(
    coordinator_did: str, origin_peer_dids: Iterable[str], chain_id: str, cid: str
) -> list[str] | None:
    """What ``coordinator_did`` forwards for this op, given the origin's peer
    list; ``None`` when it is not one of the op's coordinators in that list
    (the list it holds is stale, or the op did not come by rendezvous)."""
    return shares(rank(origin_peer_dids, chain_id, cid)).get(coordinator_did)
