"""Content-plane access errors; the HTTP layer maps each class to one status."""

from __future__ import annotations

__all__ = ["ContentAccessError", "Forbidden", "InvalidDocument", "Unauthenticated"]


class ContentAccessError(Exception):
    """Base of every content-plane refusal; the message is sent to the client."""


class Unauthenticated(ContentAccessError):
    """No valid auth token: missing, malformed, expired, wrong audience,
    unknown or rotated-out key, or a deleted identity (401)."""


class Forbidden(ContentAccessError):
    """The caller is known but holds no right to this chain (403)."""


class InvalidDocument(ContentAccessError):
    """Uploaded bytes are not JSON or do not hash to the documentCID (400)."""
