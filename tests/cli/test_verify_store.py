"""``dfos-relay verify-store`` as a subprocess: a store written by a relay
(and purged by an operator) audits clean, exit 0; every kind of corrupted
row, on SQLite and on Postgres, is named and exits 1; on Postgres it runs
against a live relay while that relay keeps ingesting."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay import create_relay
from relay.protocol import cid_of
from relay.testing.workload import DAY_MS, WorkloadBuilder, mixed_workload
from stores.factory import open_store_from_url
from tests.support.whole_purge import plan_purge

from .conftest import DFOS_RELAY, POSTGRES_URL, RelayProcess, clean_env, postgres_available

Statement = tuple[str, tuple[Any, ...]]


@dataclass
class Seeded:
    """What the corruption cases point at."""

    url: str
    alice: str
    bob: str
    carol: str
    content_id: str
    genesis: str
    update: str
    artifact: str
    beacon: str
    beacon_token: str
    countersign: str
    waiting: str  # a buffered op, with a forged copy waiting beside it


async def seed(url: str, purge: str | None = None) -> Seeded:
    now = time.time_ns() // 1_000_000
    b = WorkloadBuilder(seed=21, start_ms=now - DAY_MS)
    alice, bob, carol, dave = b.identity(), b.identity(), b.identity(), b.identity()
    b.rotate(alice)
    document = b.document(alice)
    chain = b.content_create(alice, document)
    update = b.content_update(chain)
    b.content_update(chain, parent=(chain.genesis_cid, chain.ops[0][1]))  # a fork
    b.content_update(chain, bob, authorization=b.write_credential(alice, bob))
    b.beacon(alice)
    beacon = b.beacon(alice)  # the newer one holds the row
    beacon_token = b.tokens[-1]
    artifact = b.artifact(bob)
    countersign = b.countersign(bob, chain.genesis_cid)
    b.countersign(carol, alice.head_cid)
    dave_chain = b.content_create(dave)
    b.countersign(alice, dave_chain.genesis_cid)
    relay = create_relay(open_store_from_url(url))
    async with relay.running():
        results = await relay.ingest(b.tokens + mixed_workload(60, seed=4, now_ms=now))
        assert {r.status.value for r in results} == {"new"}, [r.error for r in results]
        await relay.store.put_blob(alice.did, cid_of(document), json.dumps(document).encode())
        other = WorkloadBuilder(seed=22, start_ms=now - DAY_MS)
        lone = other.identity()
        other.tokens.pop()  # its genesis is withheld: the rotation waits in the buffer
        waiting = other.rotate(lone)
        await relay.ingest([other.tokens[-1]])
        await relay.ingest([tampered(other.tokens[-1])])  # uncheckable yet: a copy
        if purge is not None:
            target = {"dave": dave.did}[purge]
            async with relay.store.moderating() as session:
                await session.apply_moderation(await plan_purge(relay.store, target, now))
    return Seeded(url, alice.did, bob.did, carol.did, chain.content_id, chain.genesis_cid,
                  update, artifact, beacon, beacon_token, countersign, waiting)  # fmt: skip


def verify(url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [DFOS_RELAY, "verify-store", "--store", url],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


async def run_sql(url: str, statements: list[Statement]) -> None:
    if url.startswith("sqlite"):
        db = sqlite3.connect(url.split(":///", 1)[1])
        try:
            for sql, params in statements:
                db.execute(sql, params)
            db.commit()
        finally:
            db.close()
        return
    import asyncpg

    schema = url.rsplit("schema=", 1)[1]
    conn = await asyncpg.connect(POSTGRES_URL, server_settings={"search_path": schema})
    try:
        for sql, params in statements:
            parts = sql.split("?")
            numbered = parts[0] + "".join(f"${i}{p}" for i, p in enumerate(parts[1:], 1))
            await conn.execute(numbered, *params)
    finally:
        await conn.close()


def tampered(token: str) -> str:
    head, _, signature = token.rpartition(".")
    return f"{head}.{'A' * len(signature)}"


def _unique_free_ops(dialect: str) -> list[Statement]:
    """Drop the uniqueness of ops.cid so a duplicate can be stored at all."""
    if dialect == "postgres":
        return [("ALTER TABLE ops DROP CONSTRAINT ops_cid_key", ())]
    return [
        ("CREATE TABLE ops_copy AS SELECT * FROM ops", ()),
        ("DROP TABLE ops", ()),
        ("ALTER TABLE ops_copy RENAME TO ops", ()),
    ]


DUPLICATE = (
    "INSERT INTO ops (pos, cid, token, kind, chain_id, author_did, parent_cid, created_at_ms, "
    "state) SELECT (SELECT MAX(pos) + 1 FROM ops), cid, token, kind, chain_id, author_did, "
    "parent_cid, created_at_ms, state FROM ops WHERE cid = ?"
)
FLIP = "REPLACE(state, '\"deleted\":false', '\"deleted\":true')"


def corruption(case: str, s: Seeded, dialect: str) -> tuple[list[Statement], str, str]:
    """(statements, the finding kind, the subject the output must name)."""
    cases: dict[str, tuple[list[Statement], str, str]] = {
        "op-signature": (
            [("UPDATE ops SET token = ? WHERE cid = ?", (tampered(s.beacon_token), s.beacon))],
            "op-invalid", s.beacon,
        ),
        "op-state": ([(f"UPDATE ops SET state = {FLIP} WHERE cid = ?", (s.update,))],
                     "op-row", s.update),
        "op-column": ([("UPDATE ops SET author_did = ? WHERE cid = ?", (s.carol, s.artifact))],
                      "op-row", s.artifact),
        "chain-head": ([("UPDATE chains SET head_cid = ? WHERE chain_id = ?",
                         (s.update, s.content_id))], "chain-head", s.content_id),
        "chain-state": ([(f"UPDATE chains SET state = {FLIP} WHERE chain_id = ?", (s.alice,))],
                        "chain-state", s.alice),
        "log-gap": ([("DELETE FROM ops WHERE cid = ?", (s.artifact,))], "log-gap", "positions"),
        "log-duplicate": ([*_unique_free_ops(dialect), (DUPLICATE, (s.artifact,))],
                          "log-duplicate", s.artifact),
        "orphan-chain": ([("INSERT INTO chains VALUES (?, 'identity', ?, ?, 1, '{}')",
                           ("did:dfos:nobody0000000000000", s.genesis, s.genesis))],
                         "orphan", "did:dfos:nobody0000000000000"),
        "orphan-key": ([("INSERT INTO identity_keys (did, key_id, multibase) VALUES (?, ?, ?)",
                         (s.bob, "key_bogus", "z6MkBogus"))], "orphan", f"{s.bob}#key_bogus"),
        "orphan-beacon": ([("INSERT INTO beacons VALUES (?, ?, 'tok', 1)", (s.carol, s.artifact))],
                          "orphan", f"beacon {s.carol}"),
        "orphan-countersignature": (
            [("INSERT INTO countersigs (target_cid, witness_did, cid, token) VALUES (?, ?, ?, ?)",
              (s.update, s.carol, "bafyfakecountersignature", "tok"))],
            "orphan", "countersignature bafyfakecountersignature",
        ),
        "orphan-blob": ([("INSERT INTO blobs VALUES (?, 'bafyfakedocument', ?)", (s.carol, b"x"))],
                        "orphan", f"blob {s.carol} bafyfakedocument"),
        "orphan-buffered": ([("INSERT INTO raw_ops (cid, token) SELECT cid, token FROM ops "
                              "WHERE cid = ?", (s.update,))], "orphan", s.update),
        "orphan-copy-of-a-sequenced-op": (
            [("INSERT INTO raw_copies (cid, token_hash, token) VALUES (?, 'h', 'tok')",
              (s.update,))], "orphan", s.update),
        "orphan-copy-of-nothing-buffered": (
            [("INSERT INTO raw_copies (cid, token_hash, token) VALUES (?, 'h', 'tok')",
              ("bafynothingbuffered",))], "orphan", "bafynothingbuffered"),
        "copy-under-another-hash": (
            [("UPDATE raw_copies SET token_hash = 'bogus' WHERE cid = ?", (s.waiting,))],
            "orphan", "copy bogus"),
        "beacon-token": ([("UPDATE beacons SET token = ? WHERE did = ?", ("garbage", s.alice))],
                         "op-row", f"beacon {s.alice}"),
        "beacon-created-at": ([("UPDATE beacons SET created_at_ms = 1 WHERE did = ?", (s.alice,))],
                              "op-row", f"beacon {s.alice}"),
        "countersignature-token": (
            [("UPDATE countersigs SET token = 'garbage' WHERE cid = ?", (s.countersign,))],
            "op-row", f"countersignature {s.countersign}",
        ),
        "log-gap-far-away": ([("UPDATE ops SET pos = ? WHERE cid = ?", (10**12, s.artifact))],
                             "log-gap", "positions"),
        "missing-chain-row": ([("DELETE FROM chains WHERE chain_id = ?", (s.bob,))],
                              "missing-row", s.bob),
        "missing-key-row": ([("DELETE FROM identity_keys WHERE did = ?", (s.carol,))],
                            "missing-row", f"key {s.carol}#"),
        "missing-countersignature-row": (
            [("DELETE FROM countersigs WHERE cid = ?", (s.countersign,))],
            "missing-row", s.countersign,
        ),
    }  # fmt: skip
    return cases[case]


CASES = [
    "op-signature", "op-state", "op-column", "chain-head", "chain-state", "log-gap",
    "log-duplicate", "orphan-chain", "orphan-key", "orphan-beacon", "orphan-countersignature",
    "orphan-blob", "orphan-buffered", "orphan-copy-of-a-sequenced-op",
    "orphan-copy-of-nothing-buffered", "copy-under-another-hash", "beacon-token",
    "beacon-created-at", "countersignature-token", "log-gap-far-away", "missing-chain-row",
    "missing-key-row",
    "missing-countersignature-row",
]  # fmt: skip


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/relay.db"
    if not postgres_available():
        pytest.skip("no PostgreSQL server on 127.0.0.1:5432")
    url: str = request.getfixturevalue("postgres_schema_url")
    return url


def test_a_relay_written_and_purged_store_is_clean(store_url: str) -> None:
    asyncio.run(seed(store_url, purge="dave"))
    done = verify(store_url)
    assert done.returncode == 0, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.endswith(": clean") and "purged positions recorded" in last
    assert "(0 purged" not in last  # dave's purge is accounted for, not a gap


@pytest.mark.parametrize("case", CASES)
def test_each_kind_of_corrupted_row_is_named(store_url: str, case: str) -> None:
    seeded = asyncio.run(seed(store_url))
    dialect = "sqlite" if store_url.startswith("sqlite") else "postgres"
    statements, kind, subject = corruption(case, seeded, dialect)
    asyncio.run(run_sql(store_url, statements))
    done = verify(store_url)
    assert done.returncode == 1, done.stdout + done.stderr
    named = [line for line in done.stdout.splitlines() if line.startswith(kind + ":")]
    assert any(subject in line for line in named), done.stdout
    assert done.stdout.strip().endswith("problems") and "Traceback" not in done.stderr


def test_usage_and_unreadable_stores_are_one_line(tmp_path: Path) -> None:
    missing = verify(f"sqlite:///{tmp_path}/absent.db")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert missing.stderr.startswith("dfos-relay verify-store: error: ")
    assert not (tmp_path / "absent.db").exists()  # an audit never creates a store
    empty_file = tmp_path / "empty.db"
    empty_file.touch()  # a file, but no relay store in it
    empty = verify(f"sqlite:///{empty_file}")
    assert empty.returncode == 1 and empty.stderr.count("\n") == 1
    assert "no relay store in" in empty.stderr and empty_file.stat().st_size == 0
    bad = verify("mysql://x")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    memory = verify("memory://")
    assert memory.returncode == 0 and memory.stdout.strip().endswith("clean")


def test_an_sqlite_path_with_uri_characters_is_audited(tmp_path: Path) -> None:
    from stores.sqlite import SqliteStore

    async def create(path: Path) -> None:
        store = SqliteStore(path)
        await store.open()
        await store.close()

    for name in ("a#b.db", "a?b.db", "a%41.db"):
        path = tmp_path / name
        asyncio.run(create(path))
        done = verify(f"sqlite:///{path}")
        assert done.returncode == 0, (name, done.stdout + done.stderr)
        assert done.stdout.strip().endswith("clean")
    beside = ("-wal", "-shm", "-open")  # SQLite's own files and the open mark
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(beside)) == [
        "a#b.db", "a%41.db", "a?b.db",
    ]  # fmt: skip


def test_a_postgres_schema_without_a_store_is_not_audited_or_created(
    postgres_schema_url: str,
) -> None:
    """A mistyped schema is an error, not a clean (and newly created) store."""
    missing = verify(postgres_schema_url)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert "no relay store in schema" in missing.stderr

    async def tables() -> int:
        import asyncpg

        schema = postgres_schema_url.rsplit("schema=", 1)[1]
        conn = await asyncpg.connect(POSTGRES_URL)
        try:
            query = "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1"
            return int(await conn.fetchval(query, schema))
        finally:
            await conn.close()

    assert asyncio.run(tables()) == 0


def test_on_postgres_it_audits_a_live_relay_without_blocking_ingestion(
    postgres_schema_url: str,
) -> None:
    url = postgres_schema_url
    relay = RelayProcess(["--store", url])
    tokens = mixed_workload(1500, seed=31)
    done_at: list[float] = []
    stop = threading.Event()

    def ingest() -> None:
        with httpx.Client(base_url=relay.url, timeout=60) as http:
            for i in range(0, len(tokens), 25):
                if stop.is_set():
                    return
                response = http.post("/operations", json={"operations": tokens[i : i + 25]})
                assert response.status_code == 200
                done_at.append(time.monotonic())

    try:
        with httpx.Client(base_url=relay.url, timeout=60) as http:
            for i in range(0, 600, 100):  # something to audit before it starts
                http.post("/operations", json={"operations": tokens[i : i + 100]})
        tokens = tokens[600:]
        writer = threading.Thread(target=ingest)
        writer.start()
        time.sleep(0.2)
        started = time.monotonic()
        audit = verify(url)
        ended = time.monotonic()
        stop.set()
        writer.join(timeout=120)
    finally:
        relay.stop()
    assert audit.returncode == 0, audit.stdout + audit.stderr
    during = [t for t in done_at if started < t < ended]
    assert during, (ended - started, len(done_at))  # batches committed while it ran
