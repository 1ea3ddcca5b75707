"""Causal order within one round of a sequencing session.

A shuffled stream parks most ops until what they need arrives; when it does,
the whole cascade behind it (an identity's updates, a chain's later ops, the
countersigns of them) becomes sequencable at once. Attempted in one round in
causal order, the cascade sequences in that round instead of one round (a
prefetch, a precheck and a buffer read) per level. The order is only an
optimisation: an op attempted before what it needs just waits again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TypeVar

from relay.rules.claims import claimed_chain
from relay.rules.classify import dependency_rank

from .common import Submitted, depends_on_did, depends_on_op, kid_did

_I = TypeVar("_I")


def identity_did(sub: Submitted) -> str | None:
    """The DID an identity op belongs to: its genesis CID's, or its kid's."""
    return claimed_chain("identity-op", sub.cid, sub.payload, sub.decoded.kid)


def wake_keys(sub: Submitted) -> tuple[str, ...]:
    """The dependency keys ``sub`` would satisfy if accepted (see the handlers'
    ``Accepted.wakes``), used to gather a cascade before it is attempted."""
    if sub.kind == "identity-op":
        did = identity_did(sub)
        if did is not None:
            return (depends_on_op(sub.cid), depends_on_did(did))
    return (depends_on_op(sub.cid),)


def causal_order(round_: Sequence[tuple[_I, Submitted]]) -> list[tuple[_I, Submitted]]:
    """``round_`` sorted by kind priority, then each op moved after the ops of
    the round it names (parent, target) and after its signer's identity ops."""
    ranked = sorted(round_, key=lambda item: dependency_rank(item[1].kind, item[1].payload))
    if len(ranked) < 2:
        return ranked
    by_cid: dict[str, int] = {}
    identities: dict[str, list[int]] = defaultdict(list)
    for n, (_, sub) in enumerate(ranked):
        by_cid.setdefault(sub.cid, n)
        if sub.kind == "identity-op":
            did = identity_did(sub)
            if did is not None:
                identities[did].append(n)

    def needs(n: int) -> list[int]:
        sub = ranked[n][1]
        payload = sub.payload
        out: list[int] = []
        for field in ("previousOperationCID", "targetCID"):
            value = payload.get(field)
            if isinstance(value, str) and (m := by_cid.get(value)) is not None:
                out.append(m)
        if sub.kind != "identity-op":
            for did in (kid_did(sub), payload.get("did")):
                if isinstance(did, str):
                    out.extend(identities.get(did, ()))
        return out

    # Iterative depth-first post-order (a chain may be thousands deep); a
    # cycle (a forged parent link) is cut where it is found.
    state = [0] * len(ranked)  # 0 unseen, 1 on the stack, 2 emitted
    order: list[int] = []
    for root in range(len(ranked)):
        if state[root]:
            continue
        state[root] = 1
        stack: list[tuple[int, list[int]]] = [(root, needs(root))]
        while stack:
            n, pending = stack[-1]
            while pending and state[pending[-1]]:
                pending.pop()
            if pending:
                m = pending.pop()
                state[m] = 1
                stack.append((m, needs(m)))
                continue
            stack.pop()
            state[n] = 2
            order.append(n)
    return [ranked[n] for n in order]
