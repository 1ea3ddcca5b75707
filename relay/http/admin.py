"""Administration routes under ``/admin/`` (additive; README "Administration").

Every route needs ``Authorization: Bearer <admin token>`` of an operator, a
DID auth token with ``aud`` = ``<relay DID>#admin`` (``relay.admin.auth``;
a content-plane token is refused): 501 when no operator is configured, 401 for a bad
token, 403 for a DID that is not an operator. Bodies are JSON objects of
the fields each route names (``admin_body``): a malformed one, or one with
a field the route does not take, is 400 (``{"Purge": true}`` is not a ban
without a purge). Answers are camelCase JSON, shaped here; the actions
and their audit lines are ``relay.admin.service``.

    GET    /admin/bans?limit=&after=      bans by DID, with what each purge removed; a cursor
    PUT    /admin/bans/{did}              {reason?, purge?} ban (and purge)
    DELETE /admin/bans/{did}              lift a ban
    POST   /admin/waiting/drop            {did?, olderThanSeconds?} drop buffered ops
    GET    /admin/peers                   configured peers, backoff, cursors
    POST   /admin/peers/sync              {peer?} sync in now (one peer or all)
    POST   /admin/peers/reconcile         {peer} reconcile with a configured peer now
    POST   /admin/peers/pause             {url, direction?} pause a peer's links (in, out, both)
    POST   /admin/peers/resume            {url, direction?} resume them
    GET    /admin/log-level               levels in force
    PUT    /admin/log-level               {level, logger?}
    GET    /admin/ledger                  the replication ledger (peer cursors)
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from relay.admin import AdminCaller, AdminRefused, authenticate_admin
from relay.admin.audit import audit
from relay.admin.auth import token_signer
from relay.admin.service import Admin, AdminError, BanListing, BanOutcome
from relay.peering.api import PeerState
from relay.protocol import is_dfos_did

from .admin_body import read_body, read_field
from .content import identity_state
from .context import relay_of
from .errors import ApiError
from .params import limit_param

AdminHandler = Callable[[Request, Admin], Awaitable[Response]]
DEFAULT_BANS_LIMIT = 100  # a page of GET /admin/bans (at most MAX_LOG_LIMIT)
FEED_CURSOR_SUFFIX = "#changes"  # relay.peering.live keeps a feed token under <url>#changes

# The fields each route's body may hold (camelCase, as on the wire).
BAN_FIELDS = frozenset({"reason", "purge"})
DROP_FIELDS = frozenset({"did", "olderThanSeconds"})
SYNC_FIELDS = frozenset({"peer"})
RECONCILE_FIELDS = frozenset({"peer"})
PAUSE_FIELDS = frozenset({"url", "direction"})
LOG_LEVEL_FIELDS = frozenset({"level", "logger"})


async def admin_caller(request: Request) -> AdminCaller:
    """The operator the request's Bearer token admits (AdminRefused otherwise)."""
    relay = relay_of(request)
    if len(request.headers.getlist("authorization")) > 1:  # which one a proxy read is unknown
        raise AdminRefused(401, "one Authorization header is allowed")
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AdminRefused(401, "a Bearer admin token is required")
    token = token.strip()
    identity = await identity_state(relay.store, token_signer(token))
    return authenticate_admin(
        token,
        identity,
        relay.did,
        relay.clock() // 1000,
        relay.config.admin_token_max_lifetime_s,
        relay.config.admin_dids,
    )


def admin_route(handler: AdminHandler) -> Callable[[Request], Awaitable[Response]]:
    @functools.wraps(handler)
    async def guarded(request: Request) -> Response:
        relay = relay_of(request)
        if not relay.config.admin_dids:
            raise ApiError(501, "administration is not enabled on this relay (no --admin-did)")
        try:
            caller = await admin_caller(request)
        except AdminRefused as exc:
            audit("authenticate", exc.did, "refused", error=str(exc),
                  method=request.method, path=request.url.path)  # fmt: skip
            headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
            raise ApiError(exc.status, str(exc), headers) from exc
        try:
            return await handler(request, Admin(relay, caller))
        except AdminError as exc:
            raise ApiError(exc.status, str(exc)) from exc

    return guarded


# -- wire shapes -----------------------------------------------------------------


def _ban(outcome: BanOutcome | BanListing) -> dict[str, Any]:
    ban = outcome.ban
    out: dict[str, Any] = {
        "did": ban.did,
        "reason": ban.reason,
        "bannedAtMs": ban.banned_at_ms,
        "bannedBy": ban.banned_by,
    }
    if isinstance(outcome, BanListing):
        out["purged"] = {"operations": sum(outcome.purged.values()), "byKind": outcome.purged}
        return out
    report = outcome.purge
    out["purge"] = None if report is None else {
        "operations": report.operations,
        "byKind": report.by_kind,
        "chainsRemoved": report.chains_removed,
        "chainsRewound": report.chains_rewound,
        "bufferedDropped": report.buffered_dropped,
        "firstSeq": report.first_seq,
        "lastSeq": report.last_seq,
    }  # fmt: skip
    return out


def _peer(state: PeerState, cursors: dict[str, str]) -> dict[str, Any]:
    out = {
        "url": state.url,
        "behaviours": list(state.behaviours),
        "failures": state.failures,
        "retryInSeconds": state.retry_in_s,
        "gossipBacklog": state.gossip_backlog,
        "gossipDropped": state.gossip_dropped,
        "logCursor": cursors.get(state.url),
        "feedToken": cursors.get(state.url + FEED_CURSOR_SUFFIX),
    }
    if state.discovered_did is not None:  # learned from a peer's well-known list
        out["discovered"] = {"did": state.discovered_did}
    return out


# -- handlers ----------------------------------------------------------------------


@admin_route
async def list_bans(request: Request, admin: Admin) -> Response:
    after = request.query_params.get("after")
    if after is not None and not is_dfos_did(after):
        raise ApiError(400, "after must be a did:dfos DID")
    listing, cursor = await admin.bans(limit_param(request, DEFAULT_BANS_LIMIT), after)
    return JSONResponse({"bans": [_ban(item) for item in listing], "cursor": cursor})


@admin_route
async def put_ban(request: Request, admin: Admin) -> Response:
    body = await read_body(request, BAN_FIELDS)
    reason = read_field(body, "reason", str, "")
    purge = read_field(body, "purge", bool, False)
    outcome = await admin.ban(request.path_params["did"], reason, purge)
    return JSONResponse(_ban(outcome))


@admin_route
async def delete_ban(request: Request, admin: Admin) -> Response:
    did = request.path_params["did"]
    await admin.unban(did)
    return JSONResponse({"did": did, "banned": False})


@admin_route
async def drop_waiting(request: Request, admin: Admin) -> Response:
    body = await read_body(request, DROP_FIELDS)
    did = read_field(body, "did", str)
    older = read_field(body, "olderThanSeconds", int)
    return JSONResponse({"dropped": await admin.drop_waiting(did, older)})


@admin_route
async def list_peers(request: Request, admin: Admin) -> Response:
    cursors = await admin.host.store.list_peer_cursors()
    return JSONResponse({"peers": [_peer(state, cursors) for state in admin.peers()]})


@admin_route
async def sync_peers(request: Request, admin: Admin) -> Response:
    peer = read_field(await read_body(request, SYNC_FIELDS), "peer", str)
    return JSONResponse({"peer": peer, "sequenced": await admin.sync(peer)})


@admin_route
async def reconcile_peer(request: Request, admin: Admin) -> Response:
    peer = read_field(await read_body(request, RECONCILE_FIELDS), "peer", str)
    if peer is None:
        raise ApiError(400, "peer is required")
    return JSONResponse({"peer": peer, "result": await admin.reconcile(peer)})


DIRECTION_CHOICES = {"in": ("in",), "out": ("out",), "both": ("in", "out")}


async def _pause_body(request: Request) -> tuple[str, tuple[str, ...]]:
    body = await read_body(request, PAUSE_FIELDS)
    url = read_field(body, "url", str)
    if url is None:
        raise ApiError(400, "url is required")
    direction = read_field(body, "direction", str, "both")
    if direction not in DIRECTION_CHOICES:
        raise ApiError(400, "direction must be in, out or both")
    return url, DIRECTION_CHOICES[direction]


@admin_route
async def pause_peer(request: Request, admin: Admin) -> Response:
    url, directions = await _pause_body(request)
    await admin.pause(url, directions)
    return JSONResponse({"url": url, "paused": list(directions)})


@admin_route
async def resume_peer(request: Request, admin: Admin) -> Response:
    url, directions = await _pause_body(request)
    await admin.pause(url, directions, resume=True)
    return JSONResponse({"url": url, "resumed": list(directions)})


@admin_route
async def get_log_level(request: Request, admin: Admin) -> Response:
    return JSONResponse({"levels": admin.log_levels()})


@admin_route
async def put_log_level(request: Request, admin: Admin) -> Response:
    body = await read_body(request, LOG_LEVEL_FIELDS)
    level = read_field(body, "level", str)
    if level is None:
        raise ApiError(400, "level is required")
    logger = read_field(body, "logger", str)
    previous, new = admin.set_log_level(level.lower(), logger)
    return JSONResponse({"logger": logger or "root", "previous": previous, "level": new})


@admin_route
async def ledger(request: Request, admin: Admin) -> Response:
    entries = []
    for key, cursor in (await admin.ledger()).items():
        feed = key.endswith(FEED_CURSOR_SUFFIX)
        peer = key[: -len(FEED_CURSOR_SUFFIX)] if feed else key
        entries.append({"key": key, "peer": peer, "stream": "changes" if feed else "log",
                        "cursor": cursor})  # fmt: skip
    return JSONResponse({"peerCursors": entries})


ADMIN_ROUTES = [
    Route("/admin/bans", list_bans, methods=["GET"]),
    Route("/admin/bans/{did}", put_ban, methods=["PUT"]),
    Route("/admin/bans/{did}", delete_ban, methods=["DELETE"]),
    Route("/admin/waiting/drop", drop_waiting, methods=["POST"]),
    Route("/admin/peers", list_peers, methods=["GET"]),
    Route("/admin/peers/sync", sync_peers, methods=["POST"]),
    Route("/admin/peers/reconcile", reconcile_peer, methods=["POST"]),
    Route("/admin/peers/pause", pause_peer, methods=["POST"]),
    Route("/admin/peers/resume", resume_peer, methods=["POST"]),
    Route("/admin/log-level", get_log_level, methods=["GET"]),
    Route("/admin/log-level", put_log_level, methods=["PUT"]),
    Route("/admin/ledger", ledger, methods=["GET"]),
]
