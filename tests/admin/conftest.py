"""Fixtures for administration and the write gate: a started relay whose
operator is a real identity held on it, served in-process (ASGI) or by
hypercorn on loopback, over every store backend, with a settable clock and
helpers to sign admin tokens (aud = <relay DID>#admin) and content-plane
tokens (aud = the relay DID)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import pytest

from relay import Relay, create_relay
from relay.admin import admin_audience
from relay.admin.audit import AUDIT_LOGGER
from relay.config import RelayConfig
from relay.observability.logging import JsonFormatter
from relay.protocol import Ed25519Keypair, create_auth_token
from relay.rules.outcomes import Status
from relay.testing.server import serve_on_loopback
from relay.testing.workload import DAY_MS, Actor, WorkloadBuilder
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client

TRANSPORTS = ("in-process", "hypercorn")


class Clock:
    """The relay's wall clock (ms), which tests move forward."""

    def __init__(self) -> None:
        self.now_ms = time.time_ns() // 1_000_000

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


@dataclass
class World:
    relay: Relay
    client: httpx.AsyncClient
    builder: WorkloadBuilder
    clock: Clock
    operator: Actor
    alice: Actor
    bob: Actor
    outsider: Actor  # holds an identity on the relay, but is no operator
    transport: str
    audit_lines: list[dict[str, Any]] = field(default_factory=list)

    def token(
        self,
        actor: Actor | None = None,
        *,
        aud: str | None = None,
        iat: int | None = None,
        lifetime: int = 60,
        keypair: Ed25519Keypair | None = None,
    ) -> str:
        """An admin token of ``actor`` (the operator by default) unless ``aud`` is given."""
        who = actor or self.operator
        kp = keypair or who.keypair
        issued = self.clock() // 1000 - 5 if iat is None else iat
        aud = admin_audience(self.relay.did) if aud is None else aud
        return create_auth_token(
            kp, f"{who.did}#{kp.key_id}", who.did, aud, issued, issued + lifetime
        )

    def content_token(self, actor: Actor | None = None, *, lifetime: int = 60) -> str:
        """A content-plane auth token (aud = the relay DID) of ``actor``."""
        return self.token(actor, aud=self.relay.did, lifetime=lifetime)

    def beacon(self, actor: Actor) -> str:
        """A new signed beacon token of ``actor`` (the builder answers CIDs)."""
        self.builder.beacon(actor)
        return self.builder.tokens[-1]

    def auth(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.token()}"}

    async def admin(self, method: str, path: str, body: Any = None, **kw: Any) -> httpx.Response:
        headers = kw.pop("headers", None) or self.auth()
        return await self.client.request(method, path, json=body, headers=headers, **kw)

    async def post(self, tokens: Sequence[str]) -> list[dict[str, Any]]:
        response = await self.client.post("/operations", json={"operations": list(tokens)})
        assert response.status_code == 200, response.text
        results: list[dict[str, Any]] = response.json()["results"]
        return results

    def audits(self, action: str) -> list[dict[str, Any]]:
        return [line for line in self.audit_lines if line.get("action") == action]


class _Capture(logging.Handler):
    """The audit logger's lines, formatted as the relay writes them."""

    def __init__(self, sink: list[dict[str, Any]]) -> None:
        super().__init__()
        self.sink = sink
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(json.loads(self.format(record)))


@pytest.fixture
def audit_lines() -> Iterator[list[dict[str, Any]]]:
    lines: list[dict[str, Any]] = []
    handler = _Capture(lines)
    logger = logging.getLogger(AUDIT_LOGGER)
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def new_builder(clock: Clock) -> tuple[WorkloadBuilder, dict[str, Actor]]:
    b = WorkloadBuilder(seed=16, start_ms=clock() - DAY_MS)
    actors = {name: b.identity() for name in ("operator", "alice", "bob", "outsider")}
    return b, actors


@asynccontextmanager
async def serving(relay: Relay, transport: str) -> AsyncIterator[httpx.AsyncClient]:
    """``relay`` started and served; a client for it."""
    if transport == "in-process":
        async with relay.running(), asgi_client(relay.app) as client:
            yield client
        return
    async with serve_on_loopback(relay.app) as url, httpx.AsyncClient(base_url=url) as client:
        yield client


@asynccontextmanager
async def open_world(
    store: RelayStore,
    transport: str,
    audit_lines: list[dict[str, Any]],
    config: RelayConfig | None = None,
    **relay_options: Any,
) -> AsyncIterator[World]:
    clock = Clock()
    builder, actors = new_builder(clock)
    cfg = replace(config or RelayConfig(), admin_dids=(actors["operator"].did,))
    relay = create_relay(store, config=cfg, clock=clock, **relay_options)
    async with serving(relay, transport) as client:
        results = await relay.ingest(builder.tokens)
        assert all(r.status is Status.NEW for r in results), [r.error for r in results]
        yield World(relay, client, builder, clock, transport=transport,
                    audit_lines=audit_lines, **actors)  # fmt: skip


@pytest.fixture(params=TRANSPORTS)
async def world(
    request: pytest.FixtureRequest, store: RelayStore, audit_lines: list[dict[str, Any]]
) -> AsyncIterator[World]:
    async with open_world(store, request.param, audit_lines) as w:
        yield w
