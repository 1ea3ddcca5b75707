"""Pure work that can run ahead of chain verification.

Role: a relay verifies operations in a pass that is serialized with every
other chain-state change (across processes on a shared database). The two
costly steps of that pass, deriving the payload CID and checking the
Ed25519 signature, depend only on the token and a candidate key, not on
chain state. ``precheck`` does them beforehand, outside any lock, and
attaches the results to the decoded token.

Invariants:
- a precheck never decides anything: ``check_cid`` still compares the
  derived CID with the header, and a verified key only counts if the chain
  rules offer that same key for the ``kid`` when the op is verified;
- a failed or impossible precheck leaves the token as it was, so the
  verifiers simply do the work themselves.
"""

from __future__ import annotations

from collections.abc import Iterable

from .cid import cid_from_cbor
from .dagcbor import encode_canonical
from .errors import ProtocolError
from .jws import DecodedJws
from .keys import verify_signature

__all__ = ["precheck"]


def precheck(decoded: DecodedJws, candidate_keys: Iterable[bytes]) -> DecodedJws:
    """``decoded`` with its payload CID derived and, if one of
    ``candidate_keys`` verifies the signature, that key recorded."""
    payload_cid = decoded.payload_cid
    if payload_cid is None:
        try:
            cbor = encode_canonical(decoded.payload)
            payload_cid = (cid_from_cbor(cbor), cbor)
        except ProtocolError:
            pass  # the verifier derives it again and reports why
    verified = next(
        (
            key
            for key in candidate_keys
            if verify_signature(key, decoded.signing_input, decoded.signature)
        ),
        None,
    )
    d = decoded  # built directly: dataclasses.replace costs more than the CID
    return DecodedJws(
        d.token, d.header, d.payload, d.signing_input, d.signature, payload_cid, verified
    )
