"""VC-JWT claims are exactly the W3C VC v2 shape PROTOCOL.md "VC-JWT Credentials"
tabulates (the reference ``CredentialClaims`` is a strict object: iss, sub <= 256
characters, exp and iat positive integers, vc with @context, type and
credentialSubject, which holds at most a contentId <= 256). A credential with
anything else is no delegation: a content op that carries it is rejected."""

from __future__ import annotations

import pytest

from relay.protocol import (
    TYP_CONTENT,
    AuthorizationError,
    CredentialError,
    decode_jws,
    sign_jws,
    sign_operation,
    verify_content_chain,
    verify_credential,
)

from .conftest import CREATOR_DID, DELEGATE_DID, NOW_MS, NOW_S, ref_key, static_resolver, vector
from .content_helpers import RESOLVE, kid_of

K1, K3 = ref_key(1), ref_key(3)
KID1 = f"{CREATOR_DID}#{K1.key_id}"
HEADER = {"alg": "EdDSA", "typ": "vc+jwt", "kid": KID1}


def _claims(vc: dict[str, object] | None = None, **changes: object) -> dict[str, object]:
    payload = dict(decode_jws(vector("content-delegated")["authorization"]).payload)
    payload["vc"] = {**payload["vc"], **(vc or {})}  # type: ignore[dict-item]
    return {**payload, **changes}


STRAY = [
    pytest.param(_claims(jti="x"), "jti", id="extra-claim"),
    pytest.param(_claims(vc={"issuer": CREATOR_DID}), "issuer", id="extra-vc-field"),
    pytest.param(
        _claims(vc={"credentialSubject": {"contentId": "ac26z8zkke67z48af3rhh9", "role": "x"}}),
        "role",
        id="extra-subject-field",
    ),
    pytest.param(_claims(iat=0), "iat must", id="iat-zero"),
    pytest.param(_claims(exp=-1), "exp must", id="exp-negative"),
    pytest.param(
        _claims(vc={"credentialSubject": {"contentId": "c" * 257}}), "256", id="content-id-257"
    ),
    pytest.param(_claims(sub="d" * 257), "256", id="sub-257"),
]


@pytest.mark.parametrize(("claims", "message"), STRAY)
def test_credential_with_stray_claims_is_rejected(claims: dict[str, object], message: str) -> None:
    token = sign_jws(HEADER, claims, K1)
    with pytest.raises(CredentialError, match=message):
        verify_credential(token, static_resolver({KID1: K1.public_key}), NOW_S)


def test_the_vector_claims_resigned_still_verify() -> None:
    token = sign_jws(HEADER, _claims(), K1)
    verify_credential(token, static_resolver({KID1: K1.public_key}), NOW_S)


def test_delegated_op_with_a_stray_claim_in_its_credential_is_rejected() -> None:
    authorization = sign_jws(HEADER, _claims(jti="x"), K1)
    payload = dict(decode_jws(vector("content-delegated")["chain"][1]).payload)
    payload["authorization"] = authorization
    update = sign_operation(TYP_CONTENT, payload, K3, kid_of(DELEGATE_DID, K3)).token
    chain = [vector("content-delegated")["chain"][0], update]
    with pytest.raises(AuthorizationError, match="jti"):
        verify_content_chain(chain, RESOLVE, NOW_MS)
