"""The Starlette app: one declarative route table and a lifespan that starts
and stops the relay."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route, WebSocketRoute

from relay.limits import RateLimitMiddleware
from relay.observability import RequestContextMiddleware

from . import changes, changes_ws, content, forks, peers, proof, sync
from .admin import ADMIN_ROUTES
from .did import DID_ROUTES
from .errors import EXCEPTION_HANDLERS
from .forks import FORK_ROUTES
from .nul_paths import NulPathGuard
from .ops import OPS_ROUTES
from .status import STATUS_ROUTES
from .ws_server import bound_hypercorn_websockets

if TYPE_CHECKING:
    from relay.engine import Relay

PROOF_ROUTES = [
    Route("/.well-known/dfos-relay", proof.well_known, methods=["GET"]),
    Route("/operations", proof.post_operations, methods=["POST"]),
    Route("/operations/{cid}", proof.get_operation, methods=["GET"]),
    Route(
        "/operations/{cid}/countersignatures",
        proof.get_operation_countersignatures,
        methods=["GET"],
    ),
    Route("/countersignatures/{cid}", proof.get_countersignatures, methods=["GET"]),
    Route("/identities/{did}", proof.get_identity, methods=["GET"]),
    # the chain logs, plus ?branch=<cid> (additive: one fork branch)
    Route("/identities/{did}/log", forks.get_identity_log, methods=["GET"]),
    Route("/content/{content_id}", proof.get_content, methods=["GET"]),
    Route("/content/{content_id}/log", forks.get_content_log, methods=["GET"]),
    Route("/beacons/{did}", proof.get_beacon, methods=["GET"]),
    Route("/log", proof.get_log, methods=["GET"]),
]

# The changes feed (additive): SSE, or a WebSocket upgrade of the same path.
FEED_ROUTES = [
    Route("/changes", changes.changes_sse, methods=["GET"]),
    WebSocketRoute("/changes", changes_ws.changes_ws),
]

# Reconciliation (additive): Negentropy V1 rounds, ops by CID for transfer.
SYNC_ROUTES = [
    Route("/sync/negentropy", sync.post_negentropy, methods=["POST"]),
    Route("/sync/operations", sync.post_sync_operations, methods=["POST"]),
]

# The replication ledger (additive, read-only): loopback or operators only.
PEERS_ROUTES = [Route("/peers", peers.get_peers, methods=["GET"])]

# Content plane (WEB-RELAY.md "Content Plane Access"): 501 while disabled.
CONTENT_ROUTES = [
    Route("/content/{content_id}/blob", content.download_blob, methods=["GET"]),
    Route("/content/{content_id}/blob/{ref}", content.download_blob, methods=["GET"]),
    Route("/content/{content_id}/blob/{ref}", content.upload_blob, methods=["PUT"]),
]


# CORS (off unless origins are configured): what browser clients may send and read.
CORS_METHODS = ("GET", "POST", "PUT")
# X-Credential carries a reader's DFOSContentRead VC-JWT; X-Document-CID names
# the document a blob download returned (WEB-RELAY.md "Blob Download").
CORS_HEADERS = ("Authorization", "Content-Type", "Last-Event-ID", "X-Credential", "X-Request-ID")
CORS_EXPOSED = ("X-DFOS-Cursor", "X-Document-CID", "X-Request-ID", "Retry-After")
CORS_MAX_AGE_S = 600


def middleware_for(relay: Relay) -> list[Middleware]:
    """Outermost first: request id + latency + access log, CORS (when on: its
    headers reach every answer, a 429 included), rate limit, then the NUL
    path guard."""
    cors = relay.config.cors_origins
    return [
        Middleware(RequestContextMiddleware, metrics=relay.metrics),
        *(
            [
                Middleware(
                    CORSMiddleware,
                    allow_origins=list(cors),
                    allow_methods=list(CORS_METHODS),
                    allow_headers=list(CORS_HEADERS),
                    expose_headers=list(CORS_EXPOSED),
                    max_age=CORS_MAX_AGE_S,
                )
            ]
            if cors
            else []
        ),
        Middleware(
            RateLimitMiddleware,
            limit=relay.config.rate_limit,
            trusted_proxies=relay.config.trusted_proxies,
        ),
        Middleware(NulPathGuard),
    ]


def build_app(relay: Relay) -> Starlette:
    bound_hypercorn_websockets()  # before the server accepts a socket for this app

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await relay.start()
        try:
            yield
        finally:
            await relay.stop()

    app = Starlette(
        # status first: /operations/pending must not match /operations/{cid}
        routes=[
            *STATUS_ROUTES,
            *PROOF_ROUTES,
            *FORK_ROUTES,
            *DID_ROUTES,
            *FEED_ROUTES,
            *SYNC_ROUTES,
            *CONTENT_ROUTES,
            *OPS_ROUTES,
            *PEERS_ROUTES,
            *ADMIN_ROUTES,
        ],
        exception_handlers=EXCEPTION_HANDLERS,  # type: ignore[arg-type]
        lifespan=lifespan,
        middleware=middleware_for(relay),
    )
    app.state.relay = relay
    return app
