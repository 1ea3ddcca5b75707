"""Ed25519 key pairs, deterministic reference keys and fast signature checks.

Role: RFC 8032 pure EdDSA over Ed25519 via libsodium (PyNaCl bindings).
Signing is deterministic, so re-signing a payload reproduces a token exactly.

Invariants: ``Ed25519Keypair`` is immutable and its ``public_key`` always
matches its ``seed`` (checked on construction). ``verify_signature`` never
raises: any malformed input simply does not verify.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field

from nacl.bindings import crypto_sign, crypto_sign_open, crypto_sign_seed_keypair

from .ids import key_id_for_public_key
from .multikey import encode_multikey

__all__ = ["Ed25519Keypair", "reference_keypair", "verify_signature"]


@dataclass(frozen=True, slots=True)
class Ed25519Keypair:
    """An Ed25519 key pair identified by its 32-byte seed."""

    seed: bytes
    public_key: bytes
    _secret_key: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.seed) != 32:
            raise ValueError("Ed25519 seeds are 32 bytes")
        public_key, secret_key = crypto_sign_seed_keypair(self.seed)
        if public_key != self.public_key:
            raise ValueError("public key does not belong to seed")
        object.__setattr__(self, "_secret_key", secret_key)

    @classmethod
    def from_seed(cls, seed: bytes) -> Ed25519Keypair:
        """Derive the key pair for a 32-byte seed."""
        public_key, _ = crypto_sign_seed_keypair(seed)
        return cls(seed=bytes(seed), public_key=public_key)

    @classmethod
    def generate(cls) -> Ed25519Keypair:
        """Create a fresh random key pair."""
        return cls.from_seed(os.urandom(32))

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte detached signature of ``message``."""
        return crypto_sign(message, self._secret_key)[:64]

    @property
    def multikey(self) -> str:
        """Public key as a ``z6Mk...`` multikey string."""
        return encode_multikey(self.public_key)

    @property
    def key_id(self) -> str:
        """Conventional key id ``key_<id>`` derived from the public key."""
        return key_id_for_public_key(self.public_key)


def reference_keypair(n: int) -> Ed25519Keypair:
    """Reference key N of PROTOCOL.md: seed = SHA-256("dfos-protocol-reference-key-N")."""
    return Ed25519Keypair.from_seed(
        hashlib.sha256(f"dfos-protocol-reference-key-{n}".encode()).digest()
    )


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True iff ``signature`` is a valid Ed25519 signature of ``message``; never raises."""
    try:
        if len(signature) != 64 or len(public_key) != 32:
            return False
        crypto_sign_open(bytes(signature) + message, bytes(public_key))
    except Exception:
        # BadSignatureError, plus libsodium rejections of bad encodings.
        return False
    return True
