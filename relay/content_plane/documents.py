"""Which document an operation commits to, and whether uploaded bytes are it
(WEB-RELAY.md "Blob Upload": the bytes must hash to the operation's
``documentCID`` via canonical dag-cbor + sha-256).

A document nests at most ``MAX_JSON_DEPTH`` (512) arrays and objects deep,
the bound JWS payloads have: decided on the bytes before the parser or the
dag-cbor encoder recurses, so the verdict on a document is the bound's, not
how much stack the calling thread had left.

Not checked here: who may upload (``access``) or whether the op belongs to the
chain (the route compares ``OperationRecord.chain_id``).
"""

from __future__ import annotations

from relay.protocol import ProtocolError, cid_of, decode_jws
from relay.protocol.untrusted import MAX_JSON_DEPTH, json_value, nests_too_deep

from .errors import InvalidDocument

__all__ = ["check_document", "document_values", "operation_document_cid"]


def operation_document_cid(jws_token: str) -> str | None:
    """The ``documentCID`` a sequenced content operation commits to.

    ``None`` for deletes and for updates that clear the document. The token
    was verified at ingestion, so it is read, not re-verified.
    """
    document_cid = decode_jws(jws_token).payload.get("documentCID")
    return document_cid if isinstance(document_cid, str) else None


def document_values(body: bytes) -> int:
    """What checking ``body`` costs, counted in values: its commas and its
    opening brackets (inside strings too), in time linear in ``body``.

    Every value but a container's first follows a comma, and every container
    opens with a bracket; a JSON parser and the dag-cbor encoder cost by the
    value, and the depth check (``nests_too_deep``) by the bracket. So a body
    of few values costs time by its bytes alone, at C speed (a 16 MiB string
    is ~0.1 s, in calls of ~20 ms), while one of millions of tiny values is
    seconds. Not checked: that ``body`` is JSON at all.
    """
    return body.count(b",") + body.count(b"[") + body.count(b"{")


def check_document(body: bytes, document_cid: str) -> None:
    """Require ``body`` to be JSON whose canonical CID is ``document_cid``.

    The relay stores the bytes exactly as uploaded; only their parsed value
    is hashed, so formatting (whitespace, key order) does not matter. The
    bytes must be UTF-8 (RFC 8259 8.1; clients decode blobs as UTF-8): the
    UTF-16/32 that ``json.loads`` would sniff from bytes is refused. A
    leading BOM is skipped, as a WHATWG ``TextDecoder`` does. Nesting deeper
    than ``MAX_JSON_DEPTH`` is refused before parsing. What it raises
    pickles (a costly body is checked in the relay's parse child).
    """
    try:
        text = body.decode("utf-8-sig")
    except ValueError as exc:  # UnicodeDecodeError is one
        raise InvalidDocument("the document is not valid UTF-8 JSON") from exc
    if nests_too_deep(body):
        raise InvalidDocument(
            f"the document nests more than {MAX_JSON_DEPTH} arrays or objects deep"
        )
    try:
        value = json_value(text)
    except ValueError as exc:
        raise InvalidDocument("the document is not valid UTF-8 JSON") from exc
    try:
        actual = cid_of(value)
    except (ProtocolError, ValueError, TypeError) as exc:
        raise InvalidDocument(f"the document cannot be encoded as dag-cbor: {exc}") from exc
    if actual != document_cid:
        raise InvalidDocument(
            f"the document's CID {actual} does not match the operation's documentCID {document_cid}"
        )
