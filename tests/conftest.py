"""Shared fixtures: relays over every store backend, in-process and on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from relay import Relay, create_relay
from stores.base import RelayStore
from tests.support.asgi_client import asgi_client
from tests.support.backends import make_store, selected_backends


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
