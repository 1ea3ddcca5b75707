"""Auth tokens (typ JWT) and DFOS VC-JWTs (typ vc+jwt): EdDSA signature, kid DID URL
whose DID is iss, iat <= now < exp, audience for auth tokens, W3C VC v2 shape."""

from __future__ import annotations

import pytest

from relay.protocol import (
    DFOS_CONTENT_READ,
    DFOS_CONTENT_WRITE,
    CredentialError,
    KeyNotFoundError,
    b64url_encode,
    create_auth_token,
    create_credential,
    decode_credential_unsafe,
    decode_jws,
    sign_jws,
    verify_auth_token,
    verify_credential,
)

from .conftest import CREATOR_DID, DELEGATE_DID, NOW_S, ref_key, static_resolver, vector

K1, K3 = ref_key(1), ref_key(3)
KID1 = f"{CREATOR_DID}#{K1.key_id}"
RESOLVE = static_resolver({KID1: K1.public_key})
IAT, EXP = 1772841600, 1798761600
AUD = "relay.example.com"

VECTOR_CREDENTIALS = [
    pytest.param("credential-read", "credential", DFOS_CONTENT_READ, None, id="read"),
    pytest.param("credential-write", "broadCredential", DFOS_CONTENT_WRITE, None, id="write-broad"),
    pytest.param(
        "credential-write",
        "narrowCredential",
        DFOS_CONTENT_WRITE,
        "a82z92a3hndk6c97thcrn8",
        id="write-narrow",
    ),
    pytest.param(
        "content-delegated",
        "authorization",
        DFOS_CONTENT_WRITE,
        "ac26z8zkke67z48af3rhh9",
        id="delegated-authorization",
    ),
]


@pytest.mark.parametrize(("name", "field", "vc_type", "content_id"), VECTOR_CREDENTIALS)
def test_vector_credentials_verify(
    name: str, field: str, vc_type: str, content_id: str | None
) -> None:
    token = vector(name)[field]
    credential = verify_credential(token, RESOLVE, NOW_S, vc_type, DELEGATE_DID)
    assert (credential.iss, credential.sub) == (CREATOR_DID, DELEGATE_DID)
    assert credential.credential_type == vc_type
    assert credential.content_id == content_id
    assert (credential.iat, credential.exp, credential.kid) == (IAT, EXP, KID1)
    if "expected" in vector(name) and "vcType" in vector(name)["expected"]:
        assert vector(name)["expected"]["vcType"] == vc_type


@pytest.mark.parametrize(("name", "field", "vc_type", "content_id"), VECTOR_CREDENTIALS)
def test_create_credential_reproduces_vector(
    name: str, field: str, vc_type: str, content_id: str | None
) -> None:
    token = create_credential(K1, KID1, CREATOR_DID, DELEGATE_DID, vc_type, IAT, EXP, content_id)
    assert token == vector(name)[field]


def test_decode_credential_unsafe_reads_claims_without_checks() -> None:
    credential = decode_credential_unsafe(vector("credential-read")["credential"])
    assert credential.credential_type == DFOS_CONTENT_READ and credential.sub == DELEGATE_DID


@pytest.mark.parametrize(
    ("now", "message"),
    [
        pytest.param(IAT - 1, "not yet valid", id="before-iat"),
        pytest.param(EXP, "expired", id="at-exp"),
        pytest.param(EXP + 1, "expired", id="after-exp"),
    ],
)
def test_credential_temporal_validity(now: int, message: str) -> None:
    token = vector("credential-read")["credential"]
    verify_credential(token, RESOLVE, IAT)
    verify_credential(token, RESOLVE, EXP - 1)
    with pytest.raises(CredentialError, match=message):
        verify_credential(token, RESOLVE, now)


def test_credential_type_and_subject_expectations() -> None:
    token = vector("credential-read")["credential"]
    with pytest.raises(CredentialError, match="DFOSContentWrite"):
        verify_credential(token, RESOLVE, NOW_S, expected_type=DFOS_CONTENT_WRITE)
    with pytest.raises(CredentialError, match="subject"):
        verify_credential(token, RESOLVE, NOW_S, expected_subject=CREATOR_DID)


def _vc(**changes: object) -> dict[str, object]:
    payload = dict(decode_jws(vector("credential-read")["credential"]).payload)
    vc = dict(payload["vc"])  # type: ignore[call-overload]
    for key, value in changes.items():
        if key in ("type", "@context", "credentialSubject"):
            vc[key] = value
        else:
            payload[key] = value
    payload["vc"] = vc
    return payload


@pytest.mark.parametrize(
    ("header", "payload", "message"),
    [
        pytest.param({"typ": "JWT"}, _vc(), "vc\\+jwt", id="wrong-typ"),
        pytest.param({"kid": K1.key_id}, _vc(), "DID URL", id="bare-kid"),
        pytest.param({"kid": f"{DELEGATE_DID}#{K1.key_id}"}, _vc(), "iss", id="kid-not-issuer"),
        pytest.param({"kid": "did#"}, _vc(), "kid", id="malformed-kid"),
        pytest.param({}, _vc(type=["VerifiableCredential", "Other"]), "vc.type", id="unknown-type"),
        pytest.param(
            {}, _vc(type=[DFOS_CONTENT_READ, "VerifiableCredential"]), "vc.type", id="type-order"
        ),
        pytest.param({}, _vc(type=[DFOS_CONTENT_READ]), "vc.type", id="type-single"),
        pytest.param({}, _vc(**{"@context": ["https://example.com"]}), "@context", id="context"),
        pytest.param({}, _vc(credentialSubject=None), "credentialSubject", id="no-subject"),
        pytest.param(
            {}, _vc(credentialSubject={"contentId": 7}), "contentId", id="content-id-number"
        ),
        pytest.param({}, _vc(iat="yesterday"), "iat", id="iat-string"),
        pytest.param({}, _vc(sub=""), "sub", id="empty-sub"),
    ],
)
def test_malformed_credentials_are_rejected(
    header: dict[str, object], payload: dict[str, object], message: str
) -> None:
    full_header = {"alg": "EdDSA", "typ": "vc+jwt", "kid": KID1, **header}
    token = sign_jws(full_header, payload, K1)
    with pytest.raises(CredentialError, match=message):
        verify_credential(token, RESOLVE, NOW_S)


def test_tampered_credential_signature() -> None:
    head, payload, _ = vector("credential-read")["credential"].split(".")
    with pytest.raises(CredentialError, match="signature"):
        verify_credential(f"{head}.{payload}.{b64url_encode(bytes(64))}", RESOLVE, NOW_S)


def test_unresolvable_issuer_key_is_key_not_found() -> None:
    with pytest.raises(KeyNotFoundError) as info:
        verify_credential(vector("credential-read")["credential"], static_resolver({}), NOW_S)
    assert info.value.did == CREATOR_DID


def test_garbage_token_is_a_credential_error() -> None:
    with pytest.raises(CredentialError):
        verify_credential("not-a-jwt", RESOLVE, NOW_S)


# --- auth tokens -------------------------------------------------------------------------------


def _auth(**overrides: object) -> str:
    args: dict[str, object] = {
        "keypair": K1,
        "kid": KID1,
        "iss": CREATOR_DID,
        "aud": AUD,
        "iat": NOW_S - 10,
        "exp": NOW_S + 300,
    }
    args.update(overrides)
    return create_auth_token(**args)  # type: ignore[arg-type]


def test_auth_token_shape_and_verification() -> None:
    token = _auth()
    decoded = decode_jws(token)
    assert decoded.header == {"alg": "EdDSA", "typ": "JWT", "kid": KID1}
    assert list(decoded.payload) == ["iss", "sub", "aud", "exp", "iat"]
    claims = verify_auth_token(token, RESOLVE, AUD, NOW_S, max_lifetime_s=600)
    assert (claims.iss, claims.sub, claims.aud, claims.kid) == (CREATOR_DID, CREATOR_DID, AUD, KID1)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        pytest.param(_auth(aud="other.example.com"), "aud", id="wrong-aud"),
        pytest.param(_auth(iat=NOW_S + 1), "future", id="iat-in-future"),
        pytest.param(_auth(exp=NOW_S), "expired", id="expired"),
        pytest.param(_auth(exp=NOW_S + 3600), "lifetime", id="too-long-lived"),
        pytest.param(_auth(kid=f"{DELEGATE_DID}#{K1.key_id}"), "iss", id="kid-not-iss"),
        pytest.param(_auth(kid=K1.key_id), "DID URL", id="bare-kid"),
        pytest.param(_auth(keypair=K3), "signature", id="wrong-key"),
        pytest.param(
            sign_jws(
                {"alg": "EdDSA", "typ": "JWT", "kid": KID1},
                {
                    "iss": CREATOR_DID,
                    "sub": DELEGATE_DID,
                    "aud": AUD,
                    "exp": NOW_S + 60,
                    "iat": NOW_S,
                },
                K1,
            ),
            "sub",
            id="sub-not-iss",
        ),
        pytest.param(vector("credential-read")["credential"], "typ", id="vc-as-auth-token"),
    ],
)
def test_invalid_auth_tokens_are_rejected(token: str, message: str) -> None:
    with pytest.raises(CredentialError, match=message):
        verify_auth_token(token, RESOLVE, AUD, NOW_S, max_lifetime_s=600)


def test_auth_token_audience_may_be_an_array() -> None:
    token = sign_jws(
        {"alg": "EdDSA", "typ": "JWT", "kid": KID1},
        {
            "iss": CREATOR_DID,
            "sub": CREATOR_DID,
            "aud": ["x", AUD],
            "exp": NOW_S + 60,
            "iat": NOW_S,
        },
        K1,
    )
    assert verify_auth_token(token, RESOLVE, AUD, NOW_S).aud == AUD


def test_a_credential_checked_before_still_needs_a_key_the_resolver_offers() -> None:
    """Repeated checks of one credential reuse the key it verified under, but
    only while the resolver still offers that key."""
    token = vector("credential-write")["broadCredential"]
    for _ in range(2):  # the second check goes through the memo
        verify_credential(token, RESOLVE, NOW_S, DFOS_CONTENT_WRITE, DELEGATE_DID)
    other = static_resolver({KID1: K3.public_key})  # same kid, another key
    with pytest.raises(CredentialError):
        verify_credential(token, other, NOW_S, DFOS_CONTENT_WRITE, DELEGATE_DID)
