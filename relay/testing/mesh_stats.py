"""What a mesh simulation measured, computed from its recorded pushes.

Pure: ``Push`` records come from ``relay.testing.mesh_sim`` (one per
POST /operations one relay sent another, with the receiver's per-op answer),
and everything here is arithmetic over them. Only pushes of the gossip
phase count: reconciliation pushes during healing are repair, not gossip.

- *origin pushes per op*: the distinct relays the op's entry relay sent it
  to (attempts included: a push to a down coordinator still costs the origin);
- *max per-relay pushes per op*: for each op, the most distinct receivers any
  one relay sent it to;
- *delivery latency in rounds*: the hop depth of the push that first brought
  the op to a relay (the entry relay is depth 0). "First brought" is the
  first push answered ``new`` or parked on a missing dependency (the op was
  then sequenced from that copy);
- *delivered by gossip / repaired*: (relay, op) pairs held before healing
  against those held after.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

NEW = "new"
ARRIVED = frozenset({NEW, "missing-previous", "missing-identity", "missing-key", "missing-target"})


@dataclass(frozen=True, slots=True)
class Push:
    """One POST /operations from ``sender`` to ``receiver`` (relay indexes)."""

    sender: int
    receiver: int
    phase: str
    ok: bool
    answers: Mapping[str, str]  # op CID -> "new" | "duplicate" | a rejection reason
    hop: str | None = None  # the fan-out hop header, when the build sends one


def push_bound(peers: int) -> int:
    """The target: origin pushes per op <= ceil(log2 P) + 1."""
    return math.ceil(math.log2(peers)) + 1 if peers > 1 else 1


@dataclass(frozen=True, slots=True)
class PushStats:
    ops: int
    origin_mean: float
    origin_max: int
    origin_over_bound: int  # ops whose origin pushed more than push_bound(P)
    per_relay_max_mean: float  # mean over ops of the busiest relay's pushes
    per_relay_max: int
    total_mean: float  # all pushes per op, echoes included
    latency_mean: float
    latency_max: int
    gossip_pairs: int  # (relay, op) pairs reached by gossip

    def as_dict(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in self.__slots__}


def push_stats(
    pushes: Sequence[Push],
    origins: Mapping[str, int],
    peer_counts: Sequence[int],
    phase: str = "gossip",
) -> PushStats:
    """Metrics for the ops of ``origins`` (CID -> entry relay)."""
    receivers: dict[tuple[str, int], set[int]] = {}
    total: Counter[str] = Counter()
    parent: dict[tuple[str, int], int] = {}
    for push in pushes:
        if push.phase != phase:
            continue
        for cid, answer in push.answers.items():
            if cid not in origins:
                continue
            receivers.setdefault((cid, push.sender), set()).add(push.receiver)
            total[cid] += 1
            if push.ok and answer in ARRIVED:
                parent.setdefault((cid, push.receiver), push.sender)
    origin_counts, busiest = [], []
    over = 0
    for cid, origin in origins.items():
        count = len(receivers.get((cid, origin), ()))
        origin_counts.append(count)
        over += count > push_bound(peer_counts[origin])
        busiest.append(max((len(v) for (c, _), v in receivers.items() if c == cid), default=0))
    depths = list(_depths(parent, origins).values())
    n = max(len(origins), 1)
    return PushStats(
        ops=len(origins),
        origin_mean=sum(origin_counts) / n,
        origin_max=max(origin_counts, default=0),
        origin_over_bound=over,
        per_relay_max_mean=sum(busiest) / n,
        per_relay_max=max(busiest, default=0),
        total_mean=sum(total.values()) / n,
        latency_mean=sum(depths) / len(depths) if depths else 0.0,
        latency_max=max(depths, default=0),
        gossip_pairs=len(depths),
    )


def _depths(
    parent: Mapping[tuple[str, int], int], origins: Mapping[str, int]
) -> dict[tuple[str, int], int]:
    """Hop depth of each (op, relay) reached by a push, following ``parent``
    back to the op's origin. A chain that does not lead back to the origin
    (the sender held the op some other way) is left out."""
    depth: dict[tuple[str, int], int] = {}

    def walk(cid: str, relay: int) -> int | None:
        seen: list[tuple[str, int]] = []
        at: tuple[str, int] = (cid, relay)
        while at not in depth:
            if at[1] == origins[cid]:
                depth[at] = 0
                break
            if at not in parent or at in seen:
                return None
            seen.append(at)
            at = (cid, parent[at])
        base = depth[at]
        for i, key in enumerate(reversed(seen), start=1):
            depth[key] = base + i
        return depth[(cid, relay)]

    for cid, relay in parent:
        walk(cid, relay)
    return {k: v for k, v in depth.items() if v > 0}


def held_pairs(holdings: Iterable[set[str]], ops: Iterable[str]) -> int:
    """How many (relay, op) pairs of ``ops`` the relays hold."""
    wanted = set(ops)
    return sum(len(h & wanted) for h in holdings)
