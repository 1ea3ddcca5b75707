"""``GET /1.0/identifiers/{did}``: DID resolution (DID-METHOD.md 5.2), in the
path and answer shape of a Universal Resolver driver (additive to v0.7.1).

The document is built from the identity chain's head state; ``created`` is
the genesis op's createdAt, ``updated`` the head's, ``operationCount`` the
number of ops from genesis to the head (the branch the state comes from)
and ``versionId`` the head CID. A local miss reads through peers like
``GET /identities/{did}``.

- default: the resolution result, ``application/ld+json;profile=...``;
  with ``Accept: application/did+ld+json`` (or ``application/did+json``):
  the bare DID document in that media type;
- 400 ``invalidDid`` for anything that is not a ``did:dfos`` DID, 404
  ``notFound`` for an unknown one (JSON bodies with ``error`` and
  ``didResolutionMetadata.error``);
- a deleted identity answers 410 with the full result (``deactivated: true``,
  no verification methods), as W3C DID Resolution's HTTP binding asks.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from relay.protocol import IdentityState, is_dfos_did
from relay.protocol.did_document import DID_DOCUMENT_MEDIA_TYPE, did_resolution_result

from . import proof
from .context import relay_of
from .errors import ApiError

RESOLUTION_MEDIA_TYPE = 'application/ld+json;profile="https://w3id.org/did-resolution"'
DOCUMENT_MEDIA_TYPES = (DID_DOCUMENT_MEDIA_TYPE, "application/did+json")


def _failure(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": message, "didResolutionMetadata": {"error": code}}, status_code=status
    )


async def resolve_did(request: Request) -> JSONResponse:
    did = request.path_params["did"]
    if not is_dfos_did(did):
        return _failure(400, "invalidDid", "not a did:dfos DID")
    try:
        chain = await proof.chain_or_404(request, "identity", did)
    except ApiError:
        return _failure(404, "notFound", "identity not found")
    store = relay_of(request).store
    head_seq = await store.log_length()
    # the head's branch: its length and its first op (genesis), not its ops
    branch = await store.read_branch(did, "identity-op", chain.head_cid, head_seq, None, 1)
    if branch is None or not branch.entries:
        if not await store.read_chain_tips(did, "identity-op", head_seq):
            return _failure(404, "notFound", "identity not found")  # purged since
        # the head is committed with its op: this is corruption
        raise ApiError(500, "the identity's head operation is missing")
    state = IdentityState.from_record(chain.state)
    result = did_resolution_result(
        state,
        created_ms=branch.entries[0].created_at_ms,
        updated_ms=chain.head_created_at_ms,  # the head op's createdAt
        operation_count=branch.length,
        version_id=chain.head_cid,
    )
    status = 410 if state.is_deleted else 200
    accept = request.headers.get("accept", "")
    wanted = next((t for t in DOCUMENT_MEDIA_TYPES if t in accept), None)
    body: dict[str, Any] = result["didDocument"] if wanted else result
    return JSONResponse(body, status_code=status, media_type=wanted or RESOLUTION_MEDIA_TYPE)


DID_ROUTES = [Route("/1.0/identifiers/{did}", resolve_did, methods=["GET"])]
