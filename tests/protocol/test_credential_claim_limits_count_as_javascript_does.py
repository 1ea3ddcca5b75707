"""A VC-JWT's ``iss``, ``sub`` and ``contentId`` are at most 256 characters as
the reference's ``CredentialClaims`` schema (Zod, JavaScript) counts them: in
UTF-16 code units, a character beyond U+FFFF (an emoji) counting two, as the
"Operation Field Limits" are counted (README, "Decisions"). Not in code
points, where 129 emoji passed here and not at a v0.7.1 relay, which would
split the two on a delegated op; and not in UTF-8 bytes, where 256 "é" or
CJK characters, which the reference accepts, would be refused here."""

from __future__ import annotations

import pytest

from relay.protocol import CredentialError, decode_jws, sign_jws, verify_credential

from .conftest import CREATOR_DID, NOW_S, ref_key, static_resolver, vector

K1 = ref_key(1)
KID1 = f"{CREATOR_DID}#{K1.key_id}"
HEADER = {"alg": "EdDSA", "typ": "vc+jwt", "kid": KID1}
EMOJI = "\U0001f600"  # one code point, two UTF-16 code units, four UTF-8 bytes


def _token(sub: str | None = None, content_id: str | None = None) -> str:
    payload = dict(decode_jws(vector("content-delegated")["authorization"]).payload)
    if sub is not None:
        payload["sub"] = sub
    if content_id is not None:
        payload["vc"] = {**payload["vc"], "credentialSubject": {"contentId": content_id}}
    return sign_jws(HEADER, payload, K1)


def _verify(token: str) -> None:
    verify_credential(token, static_resolver({KID1: K1.public_key}), NOW_S)


OVER = {
    "sub-129-emoji": _token(sub=EMOJI * 129),  # 129 code points, 258 units
    "sub-255-ascii-and-an-emoji": _token(sub="d" * 255 + EMOJI),  # 257 units
    "content-id-129-emoji": _token(content_id=EMOJI * 129),
}
WITHIN = {
    "sub-128-emoji": _token(sub=EMOJI * 128),  # 256 units, 512 UTF-8 bytes
    "sub-256-e-acute": _token(sub="\u00e9" * 256),  # 256 units, 512 UTF-8 bytes
    "content-id-256-cjk": _token(content_id="\u6f22" * 256),  # 768 UTF-8 bytes
}


@pytest.mark.parametrize("token", OVER.values(), ids=OVER.keys())
def test_a_claim_over_256_utf16_units_is_refused(token: str) -> None:
    with pytest.raises(CredentialError, match="at most 256 characters"):
        _verify(token)


@pytest.mark.parametrize("token", WITHIN.values(), ids=WITHIN.keys())
def test_a_claim_of_256_utf16_units_is_accepted(token: str) -> None:
    _verify(token)
