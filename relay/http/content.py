"""Content-plane routes (WEB-RELAY.md "Content Plane Access"; openapi.yaml
"Content Plane").

``PUT /content/{contentId}/blob/{operationCID}`` stores the document an
operation commits to; ``GET /content/{contentId}/blob[/{ref}]`` serves it.
Handlers load states from the store and hand them to the pure rules in
``relay.content_plane``; this module maps that error tree to statuses.

Order of checks: plane enabled (501), auth token (401), chain / operation /
document exists (404), right to read or write (403), body (413, 400).
Blobs are keyed by (creator DID, documentCID) and kept byte for byte.

Checking a document is CPU-bound and parses the whole body (a 16 MiB array
of empty objects is ~4-9 s of CPU and ~450 MB of Python objects). A worker
thread does not free the event loop for it: the depth scan, the JSON parse
and much of the dag-cbor encoding are C calls that hold the GIL. Measured at
the 16 MiB cap with a concurrent ``GET /healthz``, on a thread the loop
stalled up to ~1 s for empty objects, ~1.2 s for 16 MiB of ``[`` and ~3.6 s
for arrays nested 510 deep side by side; in the parse child, 20-100 ms
(scheduling noise on a busy two-core machine). So a costly body (over 64 KiB
with more than 1,024 values, counting commas and opening brackets:
``document_values``) is checked in the relay's parse child
(``relay.parse_pool``), a cheap one on a worker thread, as is the body of a
child that is gone; the answers are the same. A long text is cheap: 16 MiB
of one string is ~0.1-0.2 s of checking in C calls of ~20-30 ms, which is
also what the loop spends receiving the body and would spend sending it to
the child. One check at a time per relay (``Relay.document_checks``), so
concurrent uploads cannot multiply that memory, and at most
``RelayConfig.parse_queue`` uploads waiting for it, each holding its body
(``Relay.documents_waiting``): one more is answered 503 + ``Retry-After``.
Uploads still receiving their bodies are bounded by their bytes, with every
other request body (``Relay.receiving``, ``relay.receive_budget``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from relay.content_plane import (
    ContentAccessError,
    Forbidden,
    InvalidDocument,
    Unauthenticated,
    auth_token_signer,
    authenticate,
    authorize_read,
    authorize_write,
    check_document,
    document_values,
    operation_document_cid,
)
from relay.parse_pool import ParseBusy
from relay.protocol import ContentState, IdentityState
from stores.base import OperationRecord, ProofReader

from .context import relay_of
from .errors import ApiError
from .params import read_body_capped

if TYPE_CHECKING:
    from relay.engine import Relay

HEAD_REF = "head"
# Blobs are opaque bytes (openapi.yaml, v0.7.1 relays): a client must get the
# stored bytes, not a JSON value it would re-serialise.
BLOB_MEDIA_TYPE = "application/octet-stream"
Handler = Callable[[Request], Awaitable[Response]]
T = TypeVar("T")

_STATUS: dict[type[ContentAccessError], int] = {
    Unauthenticated: 401,
    Forbidden: 403,
    InvalidDocument: 400,
}


def content_plane(handler: Handler) -> Handler:
    """501 while the plane is off; map content-plane refusals to JSON errors."""

    @functools.wraps(handler)
    async def guarded(request: Request) -> Response:
        if not relay_of(request).config.content:
            raise ApiError(501, "the content plane is not enabled on this relay")
        try:
            return await handler(request)
        except ContentAccessError as exc:
            status = _STATUS[type(exc)]
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            raise ApiError(status, str(exc), headers) from exc

    return guarded


def bearer_token(request: Request) -> str:
    if len(request.headers.getlist("authorization")) > 1:  # which one a proxy read is unknown
        raise Unauthenticated("one Authorization header is allowed")
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("a Bearer auth token is required")
    return token.strip()


async def identity_state(store: ProofReader, did: str) -> IdentityState | None:
    chain = await store.get_chain(did)
    if chain is None or chain.kind != "identity":
        return None
    return IdentityState.from_record(chain.state)


async def authenticated_caller(request: Request) -> str:
    """The DID proven by the request's auth token (401 otherwise)."""
    relay = relay_of(request)
    token = bearer_token(request)
    identity = await identity_state(relay.store, auth_token_signer(token))
    now_s = relay.clock() // 1000
    max_lifetime_s = relay.config.auth_token_max_lifetime_s or None  # 0: no bound
    claims = authenticate(token, identity, relay.did, now_s, max_lifetime_s)
    return claims.iss


async def content_state(store: ProofReader, content_id: str) -> ContentState:
    chain = await store.get_chain(content_id)
    if chain is None or chain.kind != "content":
        raise ApiError(404, "content chain not found")
    return ContentState.from_record(chain.state)


async def chain_operation(store: ProofReader, content_id: str, cid: str) -> OperationRecord:
    op = await store.get_operation(cid)
    if op is None or op.kind != "content-op" or op.chain_id != content_id:
        raise ApiError(404, "operation not found in this content chain")
    return op


async def on_a_thread(function: Callable[[bytes], T], body: bytes) -> T:
    return await asyncio.to_thread(function, body)


async def check_uploaded_document(relay: Relay, body: bytes, document_cid: str) -> None:
    """``check_document`` off the event loop: a costly body in the parse child,
    a cheap one (or one the child could not take) on a worker thread."""
    check = functools.partial(check_document, document_cid=document_cid)  # pickles
    pool = relay.parse_pool
    # one over the bound is refused before it queues (ParseBusy: a 503)
    with relay.documents_waiting.held():
        async with relay.document_checks:
            # counting a 16 MiB body's values is ~20 ms of C: on the thread,
            # the loop runs between its counts
            if await asyncio.to_thread(pool.is_costly, body, document_values):
                await pool.in_child(check, body, fallback=on_a_thread)
            else:
                await on_a_thread(check, body)


@content_plane
async def upload_blob(request: Request) -> Response:
    relay = relay_of(request)
    caller = await authenticated_caller(request)
    content_id = request.path_params["content_id"]
    content = await content_state(relay.store, content_id)
    op = await chain_operation(relay.store, content_id, request.path_params["ref"])
    document_cid = operation_document_cid(op.jws_token)
    if document_cid is None:
        raise ApiError(404, "the operation commits to no document")
    creator = await identity_state(relay.store, content.creator_did)
    authorize_write(caller, content, op.author_did, creator)
    body = await read_body_capped(request, relay.config.max_blob_bytes)
    try:
        await check_uploaded_document(relay, body, document_cid)
    except ParseBusy:  # answered 503 (relay.http.errors); counted here, where its kind is known
        relay.metrics.parse_queue_refused("documents")
        raise
    await relay.store.put_blob(content.creator_did, document_cid, body)
    return JSONResponse(
        {
            "status": "stored",
            "contentId": content_id,
            "documentCID": document_cid,
            "operationCID": op.cid,  # what v0.7.1 clients read
        }
    )


@content_plane
async def download_blob(request: Request) -> Response:
    relay = relay_of(request)
    caller = await authenticated_caller(request)
    content_id = request.path_params["content_id"]
    content = await content_state(relay.store, content_id)
    ref = request.path_params.get("ref", HEAD_REF)
    if ref == HEAD_REF:
        document_cid = content.current_document_cid
    else:
        op = await chain_operation(relay.store, content_id, ref)
        document_cid = operation_document_cid(op.jws_token)
    if document_cid is None:
        raise ApiError(404, "no document at this ref (deleted or cleared content)")
    creator = await identity_state(relay.store, content.creator_did)
    now_s = relay.clock() // 1000
    authorize_read(caller, content, request.headers.get("x-credential"), creator, now_s)
    blob = await relay.store.get_blob(content.creator_did, document_cid)
    if blob is None:
        raise ApiError(404, "the document has not been uploaded to this relay")
    return Response(blob, media_type=BLOB_MEDIA_TYPE, headers={"X-Document-CID": document_cid})
