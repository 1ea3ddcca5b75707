"""Shared fixtures: relays over every store backend, in-process and on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from relay import Relay, create_relay
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.backends import make_store, selected_backends, wait_for_schema_drops


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The Postgres test schemas are dropped in the background: the server is
    left tidy only once the last ones are."""
    left = wait_for_schema_drops()
    if left:
        session.config.issue_config_time_warning(
            pytest.PytestWarning(f"test schemas left on the Postgres server: {sorted(left)}"),
            stacklevel=2,
        )


@pytest.fixture(params=selected_backends())
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RelayStore]:
    async with make_store(request.param, tmp_path) as s:
        yield s


@pytest.fixture
async def relay(store: RelayStore) -> AsyncIterator[Relay]:
    r = create_relay(store)
    async with r.running():
        yield r


@pytest.fixture
async def client(relay: Relay) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(relay.app) as c:
        yield c
