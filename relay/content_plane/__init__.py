"""Content-plane access rules (WEB-RELAY.md "Content Plane", "Content Plane
Access", "Key Resolution").

Role: the pure decisions behind the blob routes - who is calling (auth
token), whether they may read a chain's documents (creator, or a
``DFOSContentRead`` credential from the creator), whether they may upload an
operation's document (creator, or that operation's signer) and whether
uploaded bytes are the committed document.

Invariants: live authentication resolves keys from the identity's *current*
state only, so a rotated-out key stops working at once and a deleted
identity can neither authenticate nor issue honoured credentials. Nothing here
does I/O or reads a clock: identity and content states and the time come in
as values; the HTTP layer loads them and maps the error tree to statuses.
A write credential never grants reading; a read credential never grants
writing (uploads look at no credential at all).

    ContentAccessError
    ├── Unauthenticated   401: missing or invalid auth token
    ├── Forbidden         403: authenticated, but no right to this chain
    └── InvalidDocument   400: uploaded bytes are not the committed document
"""

from .access import auth_token_signer, authenticate, authorize_read, authorize_write
from .documents import check_document, document_values, operation_document_cid
from .errors import ContentAccessError, Forbidden, InvalidDocument, Unauthenticated
from .keys import current_state_resolver

__all__ = [
    "ContentAccessError",
    "Forbidden",
    "InvalidDocument",
    "Unauthenticated",
    "auth_token_signer",
    "authenticate",
    "authorize_read",
    "authorize_write",
    "check_document",
    "current_state_resolver",
    "document_values",
    "operation_document_cid",
]
