"""Verified chain states (identity key sets, content chain heads).

Role: the values that chain verification produces after each operation and
that O(1) extension verification consumes. WEB-RELAY.md "Identity State" and
"Content State" give the camelCase wire shape (``to_json``); ``to_record`` /
``from_record`` give a compact JSON-able snapshot for stores.

Invariants: states are immutable and only ever produced by the verifiers (or
restored from a record a verifier produced, which is trusted and therefore not
re-validated). A deleted identity keeps its keys so history stays verifiable.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .payloads import MultikeyPublicKey
from .records import quick_init

__all__ = ["ContentState", "IdentityState"]

KeySet = tuple[MultikeyPublicKey, ...]


def _keys_to_record(keys: KeySet) -> list[list[str]]:
    return [[k.id, k.public_key_multibase] for k in keys]


def _keys_from_record(items: object) -> KeySet:
    return tuple(MultikeyPublicKey(str(i), "Multikey", str(m)) for i, m in items)  # type: ignore[attr-defined]


@quick_init
@dataclass(frozen=True, slots=True)
class IdentityState:
    """Key sets of an identity after some operation; ``is_deleted`` after a delete."""

    did: str
    is_deleted: bool
    auth_keys: KeySet
    assert_keys: KeySet
    controller_keys: KeySet

    def all_keys(self) -> Iterator[MultikeyPublicKey]:
        """Every key in every role (a key in several roles is yielded per role)."""
        yield from self.auth_keys
        yield from self.assert_keys
        yield from self.controller_keys

    def find_controller_key(self, key_id: str) -> MultikeyPublicKey | None:
        return next((k for k in self.controller_keys if k.id == key_id), None)

    def find_key(self, key_id: str) -> MultikeyPublicKey | None:
        """First key with this id in any role (auth, then assert, then controller)."""
        return next((k for k in self.all_keys() if k.id == key_id), None)

    def to_json(self) -> dict[str, object]:
        return {
            "did": self.did,
            "isDeleted": self.is_deleted,
            "authKeys": [k.to_json() for k in self.auth_keys],
            "assertKeys": [k.to_json() for k in self.assert_keys],
            "controllerKeys": [k.to_json() for k in self.controller_keys],
        }

    def to_record(self) -> dict[str, object]:
        return {
            "did": self.did,
            "deleted": self.is_deleted,
            "auth": _keys_to_record(self.auth_keys),
            "assert": _keys_to_record(self.assert_keys),
            "controller": _keys_to_record(self.controller_keys),
        }

    @classmethod
    def from_record(cls, record: dict[str, object]) -> IdentityState:
        return cls(
            did=str(record["did"]),
            is_deleted=bool(record["deleted"]),
            auth_keys=_keys_from_record(record["auth"]),
            assert_keys=_keys_from_record(record["assert"]),
            controller_keys=_keys_from_record(record["controller"]),
        )


@quick_init
@dataclass(frozen=True, slots=True)
class ContentState:
    """Head of a content chain after some operation."""

    content_id: str
    genesis_cid: str
    head_cid: str
    is_deleted: bool
    current_document_cid: str | None
    length: int
    creator_did: str

    def to_json(self) -> dict[str, object]:
        return {
            "contentId": self.content_id,
            "genesisCID": self.genesis_cid,
            "headCID": self.head_cid,
            "isDeleted": self.is_deleted,
            "currentDocumentCID": self.current_document_cid,
            "length": self.length,
            "creatorDID": self.creator_did,
        }

    def to_record(self) -> dict[str, object]:
        return {
            "content_id": self.content_id,
            "genesis_cid": self.genesis_cid,
            "head_cid": self.head_cid,
            "deleted": self.is_deleted,
            "document_cid": self.current_document_cid,
            "length": self.length,
            "creator_did": self.creator_did,
        }

    @classmethod
    def from_record(cls, record: dict[str, object]) -> ContentState:
        document = record["document_cid"]
        return cls(
            content_id=str(record["content_id"]),
            genesis_cid=str(record["genesis_cid"]),
            head_cid=str(record["head_cid"]),
            is_deleted=bool(record["deleted"]),
            current_document_cid=None if document is None else str(document),
            length=int(record["length"]),  # type: ignore[call-overload]
            creator_did=str(record["creator_did"]),
        )
