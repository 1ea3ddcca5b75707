"""Classification by JWS ``typ`` and dependency priority (WEB-RELAY.md
"Classification", "Dependency Sort")."""

from __future__ import annotations

from relay.protocol import (
    TYP_ARTIFACT,
    TYP_BEACON,
    TYP_CONTENT,
    TYP_COUNTERSIGN,
    TYP_IDENTITY,
)

KIND_BY_TYP: dict[str, str] = {
    TYP_IDENTITY: "identity-op",
    TYP_CONTENT: "content-op",
    TYP_BEACON: "beacon",
    TYP_ARTIFACT: "artifact",
    TYP_COUNTERSIGN: "countersign",
}

# Identity first (keys), then beacons and artifacts, then content, then
# countersignatures (their targets must exist).
_PRIORITY = {"identity-op": 0, "beacon": 1, "artifact": 1, "content-op": 2, "countersign": 3}


def classify(typ: object) -> str | None:
    """The operation kind for a ``typ`` header, or None when unknown."""
    return KIND_BY_TYP.get(typ) if isinstance(typ, str) else None


def dependency_rank(kind: str, payload: dict[str, object]) -> tuple[int, int]:
    """Sort key: kind priority, then genesis (no previousOperationCID) first."""
    is_extension = 1 if payload.get("previousOperationCID") is not None else 0
    return (_PRIORITY[kind], is_extension)
