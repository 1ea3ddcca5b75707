"""The chain an op claims to go on, read from its token unverified.

One rule for every reader that must place an op before (or without)
verifying it: ingest's causal order and wake-up keys, and the scope guard
judging what a peer served. Each claim is one the verifiers hold the op to,
so a claim that lies makes the op fail verification, not land elsewhere:
- an identity genesis: the DID of its own CID (its kid is a bare key id);
- an identity extension: its kid's DID (ingest routes it by that);
- a content genesis: the contentId of its own CID;
- a content extension: none here, it goes on its parent's chain, which
  only a lookup of ``previousOperationCID`` gives;
- a countersignature: its ``targetCID``;
- a beacon or an artifact: its ``did``.
"""

from __future__ import annotations

from collections.abc import Mapping

from relay.protocol import (
    ProtocolError,
    content_id_from_genesis_cid,
    did_from_genesis_cid,
    split_kid,
)


def claimed_chain(kind: str, cid: str, payload: Mapping[str, object], kid: object) -> str | None:
    """The chainId op ``cid`` of ``kind`` claims; None when it names none
    (a content extension, an identity extension without a DID kid) or the
    claim cannot be read. Nothing is verified: not the CID, not the kid."""
    previous = payload.get("previousOperationCID")
    try:
        if kind == "identity-op":
            if previous is None:
                return did_from_genesis_cid(cid)
            return split_kid(kid)[0] if isinstance(kid, str) else None
        if kind == "content-op":
            return content_id_from_genesis_cid(cid) if previous is None else None
    except ProtocolError:
        return None
    if kind not in ("countersign", "beacon", "artifact"):
        return None
    value = payload.get("targetCID" if kind == "countersign" else "did")
    return value if isinstance(value, str) else None
