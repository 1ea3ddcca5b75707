"""`dfos-relay reconcile` against a peer that answers its well-known
document and then fails (its reconcile endpoint errors, or it drops the
connection) fails in one line, and leaves behind no store it created for
nothing: the SQLite file and its open mark are removed again when the
command created them and no run moved an op (before: an empty
``dfos-relay.db`` and ``dfos-relay.db-open`` stayed). A store that existed
before is kept as it was, and so is one another store holds open, and one
from which a run pushed ops (our relay's identity, made in it, went out).

The peer is a raw asyncio HTTP server in the test (it is the peer, not our
component); the command is the real `dfos-relay` process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from relay.cli.fresh_store import FreshStore
from stores.sqlite import SqliteStore
from tests.reconcile.hostile_responder import lacks_everything

from .test_reconcile_between_relay_processes import run

WELL_KNOWN = json.dumps({"did": "did:dfos:peer", "sync": {"negentropy": 1}}).encode()


def _answer(status: str, body: bytes, kind: str = "application/json") -> bytes:
    head = f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {len(body)}\r\n"
    return head.encode() + b"connection: close\r\n\r\n" + body


def _length(head: bytes) -> int:
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def _refused(tokens: list[str]) -> bytes:
    refused = {"cid": "-", "status": "rejected", "reason": "bad-signature", "error": "no"}
    return json.dumps({"results": [refused for _ in tokens]}).encode()


@asynccontextmanager
async def failing_peer(how: str) -> AsyncIterator[str]:
    """A peer answering ``GET /.well-known/dfos-relay``, then failing:
    ``error`` answers 500, ``drop`` closes the connection without a word,
    ``refuse`` lacks everything and rejects every op pushed to it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            body = await reader.readexactly(_length(head))
            if head.startswith(b"GET /.well-known/dfos-relay "):
                writer.write(_answer("200 OK", WELL_KNOWN))
            elif how == "error":
                writer.write(_answer("500 Internal Server Error", b'{"error": "boom"}'))
            elif how == "refuse" and head.startswith(b"POST /sync/negentropy"):
                writer.write(_answer("200 OK", lacks_everything(), "application/octet-stream"))
            elif how == "refuse" and head.startswith(b"POST /operations "):
                writer.write(_answer("200 OK", _refused(json.loads(body)["operations"])))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def _reconcile(url: str, store: Path, *more: str) -> tuple[int, str]:
    done = await asyncio.to_thread(run, "reconcile", url, *more, "--store", f"sqlite:///{store}")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"dfos-relay reconcile: error: {url}"), done.stderr
    return done.returncode, done.stdout


@pytest.mark.parametrize("how", ["error", "drop"])
@pytest.mark.parametrize("flags", [[], ["--json"]])
async def test_a_store_created_for_a_run_that_failed_is_removed(
    tmp_path: Path, how: str, flags: list[str]
) -> None:
    async with failing_peer(how) as url:
        status, out = await _reconcile(url, tmp_path / "dfos-relay.db", *flags)
    assert status == 1
    if flags == ["--json"]:
        report = json.loads(out)
        assert report["error"] and (report["fetched"], report["pushed"]) == (0, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


async def test_a_store_created_for_a_run_that_moved_ops_is_kept(tmp_path: Path) -> None:
    async with failing_peer("refuse") as url:
        status, out = await _reconcile(url, tmp_path / "dfos-relay.db", "--json")
    report = json.loads(out)
    assert status == 1 and report["pushed"] > 0 and "rejected all" in report["error"]
    assert (tmp_path / "dfos-relay.db").is_file()  # our relay's identity went to the peer


async def test_a_store_that_existed_before_is_kept(tmp_path: Path) -> None:
    db = tmp_path / "kept.db"
    store = SqliteStore(db)
    await store.open()
    await store.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    async with failing_peer("error") as url:
        status, _ = await _reconcile(url, db)
    assert status == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before == ["kept.db", "kept.db-open"]


async def test_a_store_another_holds_open_is_kept(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    fresh = FreshStore.of(SqliteStore(db))
    assert fresh is not None
    other = SqliteStore(db)  # a relay that opened the file meanwhile
    await other.open()
    try:
        assert not fresh.remove()
        assert db.exists()
    finally:
        await other.close()
    assert fresh.remove() and not any(tmp_path.iterdir())
    assert FreshStore.of(SqliteStore(db)) is not None
    assert FreshStore.of(SqliteStore(tmp_path)) is None  # exists: never removed
