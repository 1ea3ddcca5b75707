"""DID-signed auth tokens and VC-JWT credentials (PROTOCOL.md "Credentials").

Role: create and verify the two JWT forms signed by a DID key:
- auth tokens (``typ: JWT``): ``{iss, sub = iss, aud, exp, iat}``, proving
  control of ``iss`` to one relay (``aud``) for a short time;
- VC-JWTs (``typ: vc+jwt``): W3C VC Data Model v2 credentials of type
  ``DFOSContentWrite`` / ``DFOSContentRead`` from ``iss`` to ``sub``,
  optionally narrowed to one content chain by ``credentialSubject.contentId``.

Invariants: ``kid`` is a DID URL whose DID equals ``iss``; ``iat <= now < exp``
(auth tokens: ``exp > now``); ``vc.@context`` is exactly the v2 context and
``vc.type`` is ``["VerifiableCredential", <DFOS type>]``; a VC-JWT holds no
claim, ``vc`` field or ``credentialSubject`` field beyond those, ``iss``,
``sub`` and ``contentId`` are at most 256 characters (UTF-16 code units, as
the reference's schema counts) and ``iat``/``exp`` positive (the reference
``CredentialClaims`` is a strict object). Every failure is a
``CredentialError`` except an unresolvable ``kid`` (``KeyNotFoundError``).
Times are passed in; nothing reads a clock. Not checked here: whether the
issuer is deleted or still holds the key (the resolver decides that).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from ._fields import js_length
from .envelope import TYP_JWT, TYP_VC, KeyResolver, verify_with_resolver
from .errors import CredentialError, MalformedError, SignatureError
from .ids import split_kid
from .jws import DecodedJws, Signer, decode_jws, sign_jws

__all__ = [
    "DFOS_CONTENT_READ",
    "DFOS_CONTENT_WRITE",
    "DFOS_CREDENTIAL_TYPES",
    "VC_CONTEXT_V2",
    "AuthClaims",
    "Credential",
    "create_auth_token",
    "create_credential",
    "decode_credential_unsafe",
    "verify_auth_token",
    "verify_credential",
    "verify_credential_at_ms",
]

DFOS_CONTENT_WRITE = "DFOSContentWrite"
DFOS_CONTENT_READ = "DFOSContentRead"
DFOS_CREDENTIAL_TYPES = frozenset({DFOS_CONTENT_WRITE, DFOS_CONTENT_READ})
VC_CONTEXT_V2 = "https://www.w3.org/ns/credentials/v2"
# the reference's CredentialClaims (Zod) caps iss, sub and contentId at 256
# characters as JavaScript counts them: UTF-16 code units (``js_length``), so
# the verdict on a delegated op is the reference relays'. Not a memory bound
# (the token is within the body or header cap), so not UTF-8 bytes.
_MAX_CLAIM_CHARS = 256
_CREDENTIAL_CLAIMS = frozenset({"iss", "sub", "exp", "iat", "vc"})
_VC_FIELDS = frozenset({"@context", "type", "credentialSubject"})
_SUBJECT_FIELDS = frozenset({"contentId"})


@dataclass(frozen=True, slots=True)
class AuthClaims:
    """Verified claims of an auth token."""

    iss: str
    sub: str
    aud: str
    iat: int
    exp: int
    kid: str


@dataclass(frozen=True, slots=True)
class Credential:
    """Claims of a DFOS VC-JWT (verified unless from ``decode_credential_unsafe``)."""

    iss: str
    sub: str
    credential_type: str
    content_id: str | None
    iat: int
    exp: int
    kid: str


def create_auth_token(keypair: Signer, kid: str, iss: str, aud: str, iat: int, exp: int) -> str:
    """Sign an auth token for relay ``aud`` (``sub`` = ``iss``)."""
    header = {"alg": "EdDSA", "typ": TYP_JWT, "kid": kid}
    payload = {"iss": iss, "sub": iss, "aud": aud, "exp": exp, "iat": iat}
    return sign_jws(header, payload, keypair)


def create_credential(
    keypair: Signer,
    kid: str,
    iss: str,
    sub: str,
    credential_type: str,
    iat: int,
    exp: int,
    content_id: str | None = None,
) -> str:
    """Sign a DFOS VC-JWT; ``content_id`` narrows it to one content chain."""
    subject: dict[str, object] = {} if content_id is None else {"contentId": content_id}
    header = {"alg": "EdDSA", "typ": TYP_VC, "kid": kid}
    payload = {
        "iss": iss,
        "sub": sub,
        "exp": exp,
        "iat": iat,
        "vc": {
            "@context": [VC_CONTEXT_V2],
            "type": ["VerifiableCredential", credential_type],
            "credentialSubject": subject,
        },
    }
    return sign_jws(header, payload, keypair)


def _decode(token: str, typ: str) -> DecodedJws:
    try:
        decoded = decode_jws(token)
    except MalformedError as exc:
        raise CredentialError(str(exc)) from exc
    if decoded.typ != typ:
        raise CredentialError(f"typ must be {typ}")
    return decoded


def _str_claim(payload: dict[str, object], name: str) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value:
        raise CredentialError(f"{name} must be a non-empty string")
    return value


def _time_claim(payload: dict[str, object], name: str) -> int:
    value = payload.get(name)
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    raise CredentialError(f"{name} must be an integer (unix seconds)")


def _issuer_kid(decoded: DecodedJws, iss: str) -> str:
    kid = decoded.kid
    if kid is None:
        raise CredentialError("JWT header has no kid")
    try:
        kid_did, _ = split_kid(kid)
    except MalformedError as exc:
        raise CredentialError(str(exc)) from exc
    if kid_did is None:
        raise CredentialError("kid must be a DID URL")
    if kid_did != iss:
        raise CredentialError("kid DID does not match iss")
    return kid


# One delegation credential authorizes many content ops, so the same token is
# checked again and again. The key each token was found to verify under is
# memoised (a token and a key verify or not, forever; the resolver must still
# offer that key). Least recently used first out: each entry holds its token
# (~0.6 KB), and a stream of one-use tokens must not fill megabytes of RSS.
_VERIFIED_LIMIT = 512
_T = TypeVar("_T")


class _Memo(Generic[_T]):
    """A memo by token, least recently used first out (a dict keeps insertion
    order: a hit moves to the end, the oldest entry is dropped when full)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._entries: dict[str, _T] = {}

    def recall(self, key: str) -> _T | None:
        value = self._entries.pop(key, None)
        if value is not None:
            self._entries[key] = value  # now the most recent
        return value

    def remember(self, key: str, value: _T) -> None:
        self._entries[key] = value
        if len(self._entries) > self._limit:
            del self._entries[next(iter(self._entries))]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries


_verified: _Memo[bytes] = _Memo(_VERIFIED_LIMIT)


def _check_signature(decoded: DecodedJws, resolve_key: KeyResolver, iss: str) -> None:
    known = _verified.recall(decoded.token)
    if known is not None and decoded.verified_key is None:
        d = decoded
        decoded = DecodedJws(
            d.token, d.header, d.payload, d.signing_input, d.signature, d.payload_cid, known
        )
    try:
        key = verify_with_resolver(decoded, resolve_key, iss)
    except SignatureError as exc:
        raise CredentialError("invalid signature") from exc
    if known is None:
        _verified.remember(decoded.token, key)


def verify_auth_token(
    token: str,
    resolve_key: KeyResolver,
    audience: str,
    now_s: int,
    max_lifetime_s: int | None = None,
) -> AuthClaims:
    """Verify an auth token for this relay at wall-clock ``now_s`` (unix seconds)."""
    decoded = _decode(token, TYP_JWT)
    claims = decoded.payload
    iss = _str_claim(claims, "iss")
    kid = _issuer_kid(decoded, iss)
    if claims.get("sub") != iss:
        raise CredentialError("sub must equal iss")
    aud = claims.get("aud")
    # RFC 7519 allows aud as a string or an array of strings.
    if not (aud == audience or (isinstance(aud, list) and audience in aud)):
        raise CredentialError("aud does not match this relay")
    iat, exp = _time_claim(claims, "iat"), _time_claim(claims, "exp")
    if iat > now_s:
        raise CredentialError("token issued in the future")
    if exp <= now_s:
        raise CredentialError("token expired")
    if max_lifetime_s is not None and exp - iat > max_lifetime_s:
        raise CredentialError(f"token lifetime exceeds {max_lifetime_s}s")
    _check_signature(decoded, resolve_key, iss)
    return AuthClaims(iss, iss, audience, iat, exp, kid)


def _only(obj: dict[str, object], allowed: frozenset[str], where: str) -> None:
    stray = next((name for name in obj if name not in allowed), None)
    if stray is not None:
        raise CredentialError(f"unknown {where} {stray!r}")


def _parse_credential(decoded: DecodedJws) -> Credential:
    claims = decoded.payload
    _only(claims, _CREDENTIAL_CLAIMS, "claim")
    iss, sub = _str_claim(claims, "iss"), _str_claim(claims, "sub")
    if js_length(iss) > _MAX_CLAIM_CHARS or js_length(sub) > _MAX_CLAIM_CHARS:
        raise CredentialError(f"iss and sub must be at most {_MAX_CLAIM_CHARS} characters")
    iat, exp = _time_claim(claims, "iat"), _time_claim(claims, "exp")
    if iat <= 0 or exp <= 0:
        raise CredentialError(f"{'iat' if iat <= 0 else 'exp'} must be a positive integer")
    vc = claims.get("vc")
    if not isinstance(vc, dict):
        raise CredentialError("vc claim must be an object")
    _only(vc, _VC_FIELDS, "vc field")
    if vc.get("@context") != [VC_CONTEXT_V2]:
        raise CredentialError("vc.@context must be the W3C credentials v2 context")
    types = vc.get("type")
    if (
        not isinstance(types, list)
        or len(types) != 2
        or types[0] != "VerifiableCredential"
        or types[1] not in DFOS_CREDENTIAL_TYPES
    ):
        raise CredentialError("vc.type must be [VerifiableCredential, DFOS credential type]")
    subject = vc.get("credentialSubject")
    if not isinstance(subject, dict):
        raise CredentialError("vc.credentialSubject must be an object")
    _only(subject, _SUBJECT_FIELDS, "credentialSubject field")
    content_id = subject.get("contentId")
    if content_id is not None and not isinstance(content_id, str):
        raise CredentialError("credentialSubject.contentId must be a string")
    if content_id is not None and js_length(content_id) > _MAX_CLAIM_CHARS:
        raise CredentialError(f"contentId must be at most {_MAX_CLAIM_CHARS} characters")
    return Credential(iss, sub, types[1], content_id, iat, exp, decoded.kid or "")


def decode_credential_unsafe(token: str) -> Credential:
    """Read a VC-JWT's claims WITHOUT checking signature, typ, kid or time."""
    try:
        decoded = decode_jws(token)
    except MalformedError as exc:
        raise CredentialError(str(exc)) from exc
    return _parse_credential(decoded)


# A delegate signs many ops under one credential: its decoded, well-formed
# claims are memoised by token (pure). Only the checks that depend on the op
# (time, type, subject, key) run each time. An entry is ~3 KB (token, parsed
# JSON, signing input): least recently used first out, as ``_verified``.
_READ_LIMIT = 512
_read: _Memo[tuple[DecodedJws, Credential]] = _Memo(_READ_LIMIT)


def _read_credential(token: str) -> tuple[DecodedJws, Credential]:
    known = _read.recall(token)
    if known is not None:
        return known
    decoded = _decode(token, TYP_VC)
    credential = _parse_credential(decoded)
    _issuer_kid(decoded, credential.iss)
    _read.remember(token, (decoded, credential))
    return decoded, credential


def verify_credential_at_ms(
    token: str,
    resolve_key: KeyResolver,
    at_ms: int,
    expected_type: str | None = None,
    expected_subject: str | None = None,
) -> Credential:
    """Verify a VC-JWT as of ``at_ms`` (epoch ms): ``iat <= at < exp``."""
    decoded, credential = _read_credential(token)
    if expected_type is not None and credential.credential_type != expected_type:
        raise CredentialError(f"credential type must be {expected_type}")
    if expected_subject is not None and credential.sub != expected_subject:
        raise CredentialError("credential subject does not match")
    if credential.iat * 1000 > at_ms:
        raise CredentialError("credential not yet valid (iat in the future)")
    if credential.exp * 1000 <= at_ms:
        raise CredentialError("credential expired")
    _check_signature(decoded, resolve_key, credential.iss)
    return credential


def verify_credential(
    token: str,
    resolve_key: KeyResolver,
    now_s: int,
    expected_type: str | None = None,
    expected_subject: str | None = None,
) -> Credential:
    """Verify a VC-JWT at wall-clock ``now_s`` (unix seconds)."""
    return verify_credential_at_ms(
        token, resolve_key, now_s * 1000, expected_type, expected_subject
    )
