"""The log level changes at run time through ``/admin/log-level``, and
every admin action is one structured audit line (JSON, with the request
id) that no log level silences."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from relay.admin.audit import AUDIT_LOGGER
from relay.observability.logging import JsonFormatter
from stores.sqlite import SqliteStore
from tests.support.backends import make_store

from .conftest import World, open_world


@pytest.fixture(autouse=True)
def restore_levels() -> Iterator[None]:
    root, peering = logging.getLogger(), logging.getLogger("dfos_relay.peering")
    levels = root.level, peering.level
    yield
    root.setLevel(levels[0])
    peering.setLevel(levels[1])


class _RootLines(logging.Handler):
    """What reaches the root logger's handlers (the relay's stderr)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[dict[str, Any]] = []
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


async def test_the_log_level_changes_at_run_time(world: World) -> None:
    logging.getLogger().setLevel(logging.INFO)
    response = await world.admin("PUT", "/admin/log-level", {"level": "debug"})
    assert response.json() == {"logger": "root", "previous": "info", "level": "debug"}
    assert logging.getLogger().level == logging.DEBUG
    body = {"level": "WARNING", "logger": "dfos_relay.peering"}
    one = await world.admin("PUT", "/admin/log-level", body)
    assert one.json()["level"] == "warning"
    levels = (await world.admin("GET", "/admin/log-level")).json()["levels"]
    assert levels["root"] == "debug" and levels["dfos_relay.peering"] == "warning"
    line = world.audits("log-level")[-1]
    # it inherited the root's level until now
    assert (line["target_logger"], line["previous"], line["new"]) == (
        "dfos_relay.peering", "debug", "warning",
    )  # fmt: skip


async def test_bad_levels_and_the_audit_logger_are_refused(world: World) -> None:
    for body in ({"level": "loud"}, {}, {"level": "info", "logger": AUDIT_LOGGER},
                 {"level": 3}):  # fmt: skip
        response = await world.admin("PUT", "/admin/log-level", body)
        assert response.status_code == 400, body
    assert logging.getLogger(AUDIT_LOGGER).level in (logging.NOTSET, logging.INFO)
    assert {line["outcome"] for line in world.audits("log-level")} == {"refused"}


async def test_audit_lines_survive_any_log_level_and_carry_the_request_id(world: World) -> None:
    root = logging.getLogger()
    handler = _RootLines()
    root.addHandler(handler)
    try:
        await world.admin("PUT", "/admin/log-level", {"level": "critical"})
        response = await world.admin(
            "GET", "/admin/bans", headers={**world.auth(), "X-Request-ID": "req-audit-1"}
        )
        assert response.status_code == 200
        await world.client.get("/admin/bans")  # refused: no token
    finally:
        root.removeHandler(handler)
    audits = [line for line in handler.lines if line.get("audit")]
    assert [line["action"] for line in audits] == ["log-level", "list-bans", "authenticate"]
    listed = audits[1]
    assert listed["logger"] == AUDIT_LOGGER and listed["level"] == "info"
    assert listed["request_id"] == "req-audit-1" and listed["admin"] == world.operator.did
    assert listed["outcome"] == "ok" and len(listed["token_id"]) == 16
    assert audits[2]["outcome"] == "refused" and audits[2]["admin"] is None
    assert audits[2]["path"] == "/admin/bans"


async def test_a_ban_whose_purge_fails_is_in_the_trail(
    tmp_path: Path, audit_lines: list[dict[str, Any]]
) -> None:
    """The ban is stored before its purge starts, so it stands when the purge
    fails; the audit trail says so (outcome ``failed``)."""
    async with (
        make_store("sqlite", tmp_path) as store,
        open_world(store, "hypercorn", audit_lines) as w,
    ):
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as db:  # what the purge writes to is gone
            db.execute("ALTER TABLE purged_ops RENAME TO purged_ops_gone")
        response = await w.admin("PUT", f"/admin/bans/{w.alice.did}", {"purge": True})
        assert response.status_code == 500
        assert [ban.did for ban in await store.list_bans()] == [w.alice.did]
        line = w.audits("ban")[-1]
        assert line["outcome"] == "failed" and line["admin"] == w.operator.did
        assert line["did"] == w.alice.did and line["purge"] is True
        assert "purge failed" in line["error"]
