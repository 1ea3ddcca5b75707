"""A scope: the canonical set of identity DIDs and contentIds a consumer
follows, and its ``scopeId``.

The scopeId is a hash of the canonical form (members deduplicated and
sorted, DIDs and contentIds apart), so two consumers naming the same set in
any order, with repeats, get the same id and share a ledger row shape.
Members are checked here, once: a malformed member, an empty scope or one
over ``MAX_SCOPE_MEMBERS`` is a ``ScopeError`` whose message is one line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from relay.protocol import base32_encode, encode_canonical, is_content_id, is_dfos_did
from relay.protocol.untrusted import json_value

# A scope travels in a query string (GET /changes, /log, POST
# /sync/negentropy): 200 DIDs are ~6.4 KB, inside every server's line limit.
MAX_SCOPE_MEMBERS = 200
MAX_SCOPE_FILE_BYTES = 64 * 1024
SCOPE_ID_PREFIX = "scope:"


class ScopeError(ValueError):
    """A scope that cannot be used (the message is one line for the user)."""


@dataclass(frozen=True, slots=True)
class Scope:
    dids: tuple[str, ...]  # sorted, unique
    content_ids: tuple[str, ...]  # sorted, unique

    @classmethod
    def of(cls, members: Iterable[str]) -> Scope:
        """The scope of ``members`` (DIDs and contentIds), validated."""
        dids: set[str] = set()
        contents: set[str] = set()
        count = 0
        for raw in members:
            member = raw.strip()
            if not member:
                continue
            count += 1
            if count > MAX_SCOPE_MEMBERS * 4:  # bound the work on a hostile list
                break
            if is_dfos_did(member):
                dids.add(member)
            elif is_content_id(member):
                contents.add(member)
            else:
                raise ScopeError(f"not a did:dfos DID or contentId: {member[:80]!r}")
        total = len(dids) + len(contents)
        if total == 0:
            raise ScopeError("scope is empty: name at least one DID or contentId")
        if total > MAX_SCOPE_MEMBERS or count > MAX_SCOPE_MEMBERS * 4:
            raise ScopeError(f"scope has more than {MAX_SCOPE_MEMBERS} members")
        return cls(tuple(sorted(dids)), tuple(sorted(contents)))

    @property
    def members(self) -> tuple[str, ...]:
        return self.dids + self.content_ids

    @property
    def scope_id(self) -> str:
        canonical = encode_canonical(
            {"dids": list(self.dids), "contentIds": list(self.content_ids)}
        )
        digest = hashlib.sha256(canonical).digest()[:20]
        return SCOPE_ID_PREFIX + base32_encode(digest)

    def query_value(self) -> str:
        """The ``scope=`` query parameter value (comma-separated members)."""
        return ",".join(self.members)

    def to_json(self) -> dict[str, object]:
        return {
            "scopeId": self.scope_id,
            "dids": list(self.dids),
            "contentIds": list(self.content_ids),
        }


def parse_scope(value: str | Iterable[str]) -> Scope:
    """A scope from ``did,contentId,...`` (commas or whitespace) or a list."""
    if isinstance(value, str):
        return Scope.of(value.replace(",", " ").split())
    members = list(value)
    if not all(isinstance(m, str) for m in members):
        raise ScopeError("scope members must be strings")
    return Scope.of(members)


def load_scope_file(path: str | Path) -> Scope:
    """A scope from a file: JSON (``{"dids": [...], "contentIds": [...]}`` or a
    list) or plain text, one or more members per line, ``#`` comments."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_SCOPE_FILE_BYTES + 1)
    except OSError as exc:
        raise ScopeError(f"cannot read scope file {str(file)!r}: {exc.strerror or exc}") from None
    if len(data) > MAX_SCOPE_FILE_BYTES:
        raise ScopeError(f"scope file {str(file)!r} is larger than {MAX_SCOPE_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8-sig")  # a byte order mark (some editors write one) is not text
    except UnicodeDecodeError:
        raise ScopeError(f"scope file {str(file)!r} is not UTF-8 text") from None
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return _from_json(file, stripped)
    lines = (line.partition("#")[0] for line in text.splitlines())
    return parse_scope(" ".join(lines))


def _from_json(file: Path, text: str) -> Scope:
    try:
        data = json_value(text)
    except ValueError as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ScopeError(f"scope file {str(file)!r} is not valid JSON: {why}") from None
    if isinstance(data, list):
        return parse_scope(data)
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"dids", "contentIds"})
        if unknown:
            raise ScopeError(f"scope file {str(file)!r}: unknown keys {unknown}")
        members: list[str] = []
        for key in ("dids", "contentIds"):
            values = data.get(key, [])
            if not isinstance(values, list):
                raise ScopeError(f"scope file {str(file)!r}: {key} must be a list")
            members.extend(values)
        return parse_scope(members)
    raise ScopeError(f"scope file {str(file)!r} must hold a JSON object or list")
