"""The order in which ops are handed to another relay so it can sequence
each one at once instead of parking it for a dependency.

Identity ops first, then beacons and artifacts (they need only their
signer's identity), then content ops (creator, signers and credential
issuers are identities), then countersignatures (their target may be any
of the above). Within a kind, the serving relay's log order: a relay logs
an op only after its dependencies, so that is genesis before extensions
and chain order within a chain.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

KIND_RANK = {"identity-op": 0, "beacon": 1, "artifact": 1, "content-op": 2, "countersign": 3}


class Transferable(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def seq(self) -> int: ...


T = TypeVar("T", bound=Transferable)


def transfer_order(ops: Iterable[T]) -> list[T]:
    return sorted(ops, key=lambda op: (KIND_RANK.get(op.kind, len(KIND_RANK)), op.seq))
