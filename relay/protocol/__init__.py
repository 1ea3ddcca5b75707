"""DFOS v0.7.1 protocol core: encodings, CIDs, signatures, payloads, chains.

Role: the pure library the relay, peers and Spark jobs build on. It knows
nothing about relays, stores, HTTP or clocks: time, keys and trusted chain
state are passed in as values, and every failure is a ``ProtocolError``.

Layers inside (each module states its own invariants):
encoding / dagcbor / cid / ids / multikey / keys / jws / timestamps  (primitives)
payloads / state                                                     (schemas)
envelope / identity_chain / content_chain / beacon / artifact /
countersign / credentials / merkle                                   (verification)
builders                                                             (signing helpers)

Imports only the standard library and PyNaCl.
"""

from .artifact import VerifiedArtifact, verify_artifact
from .beacon import VerifiedBeacon, verify_beacon
from .builders import (
    artifact_payload,
    beacon_payload,
    content_create_payload,
    content_delete_payload,
    content_update_payload,
    countersign_payload,
    identity_create_payload,
    identity_delete_payload,
    identity_update_payload,
    key_entry,
)
from .cid import cid_from_cbor, cid_of, cid_to_bytes, is_cid
from .content_chain import (
    ContentChainResult,
    VerifiedContentOp,
    verify_content_chain,
    verify_content_extension,
    verify_content_genesis,
)
from .countersign import VerifiedCountersign, verify_countersign
from .credentials import (
    DFOS_CONTENT_READ,
    DFOS_CONTENT_WRITE,
    AuthClaims,
    Credential,
    create_auth_token,
    create_credential,
    decode_credential_unsafe,
    verify_auth_token,
    verify_credential,
    verify_credential_at_ms,
)
from .dagcbor import encode_canonical
from .encoding import (
    b64url_decode,
    b64url_encode,
    base32_decode,
    base32_encode,
    base58btc_decode,
    base58btc_encode,
)
from .envelope import (
    BEACON_FUTURE_GUARD_MS,
    FUTURE_GUARD_MS,
    TYP_ARTIFACT,
    TYP_BEACON,
    TYP_CONTENT,
    TYP_COUNTERSIGN,
    TYP_IDENTITY,
    TYP_JWT,
    TYP_VC,
    KeyResolver,
    SignedOperation,
    check_cid,
    check_typ_not_future,
    resolve_from_key_index,
    sign_operation,
)
from .errors import (
    AuthorizationError,
    ChainError,
    CidMismatchError,
    CredentialError,
    FutureTimestampError,
    KeyNotFoundError,
    MalformedError,
    ProtocolError,
    SignatureError,
)
from .identity_chain import (
    IdentityChainResult,
    VerifiedIdentityOp,
    verify_identity_chain,
    verify_identity_extension,
    verify_identity_genesis,
)
from .ids import (
    ID_ALPHABET,
    ID_LENGTH,
    chain_id_from_genesis_cid,
    content_id_from_genesis_cid,
    did_from_genesis_cid,
    encode_id,
    is_content_id,
    is_dfos_did,
    key_id_for_public_key,
    split_kid,
)
from .jws import DecodedJws, decode_jws, sign_jws, token_hash, verify_jws
from .keys import Ed25519Keypair, reference_keypair, verify_signature
from .merkle import ProofStep, merkle_proof, merkle_root, verify_merkle_proof
from .multikey import decode_multikey, encode_multikey
from .payloads import (
    ARTIFACT_MAX_CBOR_BYTES,
    MAX_KEYS_PER_ROLE,
    ArtifactPayload,
    BeaconPayload,
    ContentOperation,
    CountersignPayload,
    IdentityOperation,
    MultikeyPublicKey,
    check_typ_payload,
    parse_artifact,
    parse_beacon,
    parse_content_operation,
    parse_countersign,
    parse_identity_operation,
    parse_multikey_public_key,
)
from .precheck import precheck
from .state import ContentState, IdentityState
from .timestamps import format_timestamp, parse_timestamp

__all__ = [
    "ARTIFACT_MAX_CBOR_BYTES",
    "BEACON_FUTURE_GUARD_MS",
    "DFOS_CONTENT_READ",
    "DFOS_CONTENT_WRITE",
    "FUTURE_GUARD_MS",
    "ID_ALPHABET",
    "ID_LENGTH",
    "MAX_KEYS_PER_ROLE",
    "TYP_ARTIFACT",
    "TYP_BEACON",
    "TYP_CONTENT",
    "TYP_COUNTERSIGN",
    "TYP_IDENTITY",
    "TYP_JWT",
    "TYP_VC",
    "ArtifactPayload",
    "AuthClaims",
    "AuthorizationError",
    "BeaconPayload",
    "ChainError",
    "CidMismatchError",
    "ContentChainResult",
    "ContentOperation",
    "ContentState",
    "CountersignPayload",
    "Credential",
    "CredentialError",
    "DecodedJws",
    "Ed25519Keypair",
    "FutureTimestampError",
    "IdentityChainResult",
    "IdentityOperation",
    "IdentityState",
    "KeyNotFoundError",
    "KeyResolver",
    "MalformedError",
    "MultikeyPublicKey",
    "ProofStep",
    "ProtocolError",
    "SignatureError",
    "SignedOperation",
    "VerifiedArtifact",
    "VerifiedBeacon",
    "VerifiedContentOp",
    "VerifiedCountersign",
    "VerifiedIdentityOp",
    "artifact_payload",
    "b64url_decode",
    "b64url_encode",
    "base32_decode",
    "base32_encode",
    "base58btc_decode",
    "base58btc_encode",
    "beacon_payload",
    "chain_id_from_genesis_cid",
    "check_cid",
    "check_typ_not_future",
    "check_typ_payload",
    "cid_from_cbor",
    "cid_of",
    "cid_to_bytes",
    "content_create_payload",
    "content_delete_payload",
    "content_id_from_genesis_cid",
    "content_update_payload",
    "countersign_payload",
    "create_auth_token",
    "create_credential",
    "decode_credential_unsafe",
    "decode_jws",
    "decode_multikey",
    "did_from_genesis_cid",
    "encode_canonical",
    "encode_id",
    "encode_multikey",
    "format_timestamp",
    "identity_create_payload",
    "identity_delete_payload",
    "identity_update_payload",
    "is_cid",
    "is_content_id",
    "is_dfos_did",
    "key_entry",
    "key_id_for_public_key",
    "merkle_proof",
    "merkle_root",
    "parse_artifact",
    "parse_beacon",
    "parse_content_operation",
    "parse_countersign",
    "parse_identity_operation",
    "parse_multikey_public_key",
    "parse_timestamp",
    "precheck",
    "reference_keypair",
    "resolve_from_key_index",
    "sign_jws",
    "sign_operation",
    "split_kid",
    "token_hash",
    "verify_artifact",
    "verify_auth_token",
    "verify_beacon",
    "verify_content_chain",
    "verify_content_extension",
    "verify_content_genesis",
    "verify_countersign",
    "verify_credential",
    "verify_credential_at_ms",
    "verify_identity_chain",
    "verify_identity_extension",
    "verify_identity_genesis",
    "verify_jws",
    "verify_merkle_proof",
    "verify_signature",
]
