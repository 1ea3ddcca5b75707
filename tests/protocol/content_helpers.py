"""Content-chain builders shared by the content chain test modules.

The creator is the reference identity (key 2 is its current controller, key 1
its genesis key); the delegate is did:dfos:nzkf838efr424433rn2rzk with key 3.
"""

from __future__ import annotations

from relay.protocol import (
    DFOS_CONTENT_WRITE,
    TYP_CONTENT,
    Ed25519Keypair,
    KeyResolver,
    VerifiedContentOp,
    cid_of,
    content_create_payload,
    content_update_payload,
    create_credential,
    decode_jws,
    format_timestamp,
    sign_operation,
    verify_content_extension,
    verify_content_genesis,
)

from .conftest import CREATOR_DID, DELEGATE_DID, NOW_MS, ref_key, reference_resolver

K1, K2, K3 = ref_key(1), ref_key(2), ref_key(3)
RESOLVE = reference_resolver()
T0 = NOW_MS - 3_600_000
DOC_A = cid_of({"$schema": "https://schemas.dfos.com/post/v1", "format": "short-post", "body": "a"})
DOC_B = cid_of({"$schema": "https://schemas.dfos.com/post/v1", "format": "short-post", "body": "b"})


def ts(offset_ms: int = 0) -> str:
    return format_timestamp(T0 + offset_ms)


def kid_of(did: str, key: Ed25519Keypair) -> str:
    return f"{did}#{key.key_id}"


def genesis(at: str | None = None) -> VerifiedContentOp:
    payload = content_create_payload(CREATOR_DID, DOC_A, at or ts())
    token = sign_operation(TYP_CONTENT, payload, K2, kid_of(CREATOR_DID, K2)).token
    return verify_content_genesis(decode_jws(token), RESOLVE, NOW_MS)


def extend(
    parent: VerifiedContentOp,
    payload: dict[str, object],
    signer: Ed25519Keypair = K2,
    kid: str | None = None,
    resolve: KeyResolver = RESOLVE,
    enforce: bool = True,
) -> VerifiedContentOp:
    signer_did = str(payload["did"])
    token = sign_operation(TYP_CONTENT, payload, signer, kid or kid_of(signer_did, signer)).token
    return verify_content_extension(
        decode_jws(token),
        parent.cid,
        parent.state,
        parent.operation.created_at_ms,
        resolve,
        NOW_MS,
        enforce_authorization=enforce,
    )


def delegate_update(
    parent: VerifiedContentOp, authorization: str | None, at: int = 60_000
) -> dict[str, object]:
    return content_update_payload(
        DELEGATE_DID, parent.cid, DOC_B, ts(at), DOC_A, "delegated", authorization=authorization
    )


def write_credential(**overrides: object) -> str:
    args: dict[str, object] = {
        "keypair": K1,
        "kid": kid_of(CREATOR_DID, K1),
        "iss": CREATOR_DID,
        "sub": DELEGATE_DID,
        "credential_type": DFOS_CONTENT_WRITE,
        "iat": (T0 - 60_000) // 1000,
        "exp": (T0 + 3_600_000) // 1000,
        "content_id": None,
    }
    args.update(overrides)
    return create_credential(**args)  # type: ignore[arg-type]
