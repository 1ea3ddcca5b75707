"""Versioned schema of the durable stores (both dialects).

Chain history is indexed rows, never a JSON array rewritten per append:

- ``ops``            every sequenced op by CID with its log position (``pos``,
                     1, 2, 3, ... in commit order, never reused: only a purge
                     leaves holes), chain membership (``chain_id``, ``kind``),
                     parent link and the state snapshot *after* the op (O(1)
                     state-at-CID for forks)
- ``chains``         identity/content chains: genesis, head, head state
- ``identity_keys``  every key an identity ever held, unique per (did, kid, key)
- ``beacons``        latest beacon per DID
- ``countersigs``    unique per (target CID, witness DID)
- ``rejections``     permanent rejections by token hash
- ``raw_ops``        the store-then-verify buffer; ``waits_for`` set = pending,
                     indexed by the dependency it waits for
                     (``taken`` is no longer written: a sequencing session
                     remembers in memory which ops it took)
- ``blobs``          by (creator DID, documentCID)
- ``peer_cursors``, ``relay_identity`` (single row)
- ``feed_meta``      the changes feed's epoch (single row, v2)
- ``raw_ops.since_ms`` when a buffered op first started waiting (v3)
- ``rejection_notes`` the most recent rejection per CID, to explain it; ``n``
                     orders notes by recency (a re-noted CID gets a new ``n``),
                     so the oldest are pruned by one range delete (v3)
- ``bans``           DIDs whose new ops are refused (v4)
- ``purged_ops``     the record of every op a purge removed, with its position (v4),
                     indexed by it (v8): the log's head counts purged positions
- ``raw_ops.received_at_ms`` when a buffered op first arrived (v4)
- ``peer_links``     the per-link replication ledger, one row per (peer, scope,
                     direction); pending tokens and diagnostics as JSON text (v5)
- ``raw_ops_pending`` Postgres only: the number of buffered ops that wait
                     (``waits_for`` set), one row kept exact by statement
                     triggers on ``raw_ops`` (v6), and on ``raw_copies`` (v7)
- ``raw_copies``     other tokens of a buffered CID, by (cid, token hash);
                     deleted with the CID's ``raw_ops`` row by a trigger (v7)
- ``ops_children``   ops by parent CID and position (v9): a chain's tips are
                     its ops without a child, found without reading the chain
- ``server_start``   Postgres only: the database server's start the store last
                     saw, and whether commits were asynchronous under it (v10);
                     the log's head when that start was first seen, and whether
                     a new feed epoch was started for it (v11)
- ``out_link_marks`` each process's share of an out-link, one row per (peer,
                     scope, writer) (v12); the out-links ``peer_links`` held
                     become shares left behind (``updated_ms`` 0)
- ``purges_under_way`` the purges a step began and none finished (v13)
- ``ban_changes``    the change mark of each DID ever banned (its last ban or
                     unban), written by triggers on ``bans``, and
                     ``ban_change_count`` the mark the last change reached (v14)
- ``countersigs_cid``, ``beacons_cid`` countersignatures and beacons by their
                     op's CID (v15): a purge step deletes them by it

``schema_version`` holds the version. ``pending_migrations`` refuses a
database newer than this code (never drops or rewrites what it does not know).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from stores.base import StoreError
from stores.sql.dialect import Dialect


@dataclass(frozen=True, slots=True)
class Only:
    """A statement for one dialect only (its trigger syntax, PL/pgSQL), as is."""

    dialect: str
    sql: str


VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
READ_VERSION = "SELECT MAX(version) FROM schema_version"

_V1 = [
    """CREATE TABLE ops (
        pos {BIGINT} PRIMARY KEY,
        cid TEXT NOT NULL UNIQUE,
        token TEXT NOT NULL,
        kind TEXT NOT NULL,
        chain_id TEXT NOT NULL,
        author_did TEXT NOT NULL,
        parent_cid TEXT,
        created_at_ms {BIGINT} NOT NULL,
        state TEXT)""",
    """CREATE INDEX ops_chain_log ON ops (chain_id, pos)
        WHERE kind IN ('identity-op', 'content-op')""",
    """CREATE TABLE chains (
        chain_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        genesis_cid TEXT NOT NULL,
        head_cid TEXT NOT NULL,
        head_created_at_ms {BIGINT} NOT NULL,
        state TEXT NOT NULL)""",
    """CREATE TABLE identity_keys (
        id {SERIAL_PK},
        did TEXT NOT NULL,
        key_id TEXT NOT NULL,
        multibase TEXT NOT NULL,
        UNIQUE (did, key_id, multibase))""",
    """CREATE TABLE beacons (
        did TEXT PRIMARY KEY,
        cid TEXT NOT NULL,
        token TEXT NOT NULL,
        created_at_ms {BIGINT} NOT NULL)""",
    """CREATE TABLE countersigs (
        id {SERIAL_PK},
        target_cid TEXT NOT NULL,
        witness_did TEXT NOT NULL,
        cid TEXT NOT NULL,
        token TEXT NOT NULL,
        UNIQUE (target_cid, witness_did))""",
    """CREATE TABLE rejections (
        token_hash TEXT PRIMARY KEY,
        cid TEXT NOT NULL,
        reason TEXT NOT NULL)""",
    """CREATE TABLE raw_ops (
        cid TEXT PRIMARY KEY,
        token TEXT NOT NULL,
        waits_for TEXT,
        taken INTEGER NOT NULL DEFAULT 0)""",
    "CREATE INDEX raw_ops_waits_for ON raw_ops (waits_for) WHERE waits_for IS NOT NULL",
    """CREATE TABLE blobs (
        creator_did TEXT NOT NULL,
        document_cid TEXT NOT NULL,
        data {BLOB} NOT NULL,
        PRIMARY KEY (creator_did, document_cid))""",
    """CREATE TABLE peer_cursors (
        peer_url TEXT PRIMARY KEY,
        cursor TEXT NOT NULL)""",
    """CREATE TABLE relay_identity (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        did TEXT NOT NULL,
        key_id TEXT NOT NULL,
        seed {BLOB} NOT NULL,
        genesis_token TEXT NOT NULL,
        profile_token TEXT NOT NULL)""",
]

# The changes feed: the epoch of the log's seq domain, and indexes for its
# snapshot reads (parentless ops by (createdAt, CID); standalone ops by chain).
_V2 = [
    """CREATE TABLE feed_meta (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        epoch TEXT NOT NULL)""",
    "CREATE INDEX ops_roots ON ops (created_at_ms, cid) WHERE parent_cid IS NULL",
    """CREATE INDEX ops_standalone ON ops (chain_id, pos)
        WHERE kind IN ('beacon', 'artifact', 'countersign')""",
]

# Explained op status: how long buffered ops have waited, and recent
# rejections by CID (the rejections table is keyed by token hash and keeps
# only permanent ones).
_V3 = [
    "ALTER TABLE raw_ops ADD COLUMN since_ms {BIGINT}",
    "CREATE INDEX raw_ops_since ON raw_ops (since_ms) WHERE waits_for IS NOT NULL",
    """CREATE TABLE rejection_notes (
        n {SERIAL_PK},
        cid TEXT NOT NULL UNIQUE,
        reason TEXT NOT NULL,
        detail TEXT NOT NULL,
        token_hash TEXT NOT NULL,
        at_ms {BIGINT} NOT NULL)""",
]

# Administration: bans, the record of purges, ops by signer (a purge finds
# them), and when each buffered op arrived (dropping waiting ops by age).
_V4 = [
    """CREATE TABLE bans (
        did TEXT PRIMARY KEY,
        reason TEXT NOT NULL,
        banned_at_ms {BIGINT} NOT NULL,
        banned_by TEXT NOT NULL)""",
    """CREATE TABLE purged_ops (
        id {SERIAL_PK},
        pos {BIGINT} NOT NULL,
        cid TEXT NOT NULL,
        kind TEXT NOT NULL,
        chain_id TEXT NOT NULL,
        author_did TEXT NOT NULL,
        purged_did TEXT NOT NULL,
        purged_at_ms {BIGINT} NOT NULL)""",
    "CREATE INDEX purged_ops_did ON purged_ops (purged_did)",
    "CREATE INDEX ops_author ON ops (author_did, pos)",
    "ALTER TABLE raw_ops ADD COLUMN received_at_ms {BIGINT} NOT NULL DEFAULT 0",
]

# The consumer-owned replication ledger (issue 15): one row per link, upserted whole.
_V5 = [
    """CREATE TABLE peer_links (
        peer_url TEXT NOT NULL,
        scope_id TEXT NOT NULL,
        direction TEXT NOT NULL,
        state TEXT NOT NULL,
        received_token TEXT,
        applied_token TEXT,
        pending_tokens TEXT NOT NULL,
        failures INTEGER NOT NULL,
        last_success_ms {BIGINT},
        last_failure_ms {BIGINT},
        last_error TEXT,
        diagnostics TEXT NOT NULL,
        remote_head {BIGINT},
        caught_up_ms {BIGINT},
        updated_ms {BIGINT} NOT NULL,
        PRIMARY KEY (peer_url, scope_id, direction))""",
]

# The pending count as a row (Postgres): each sequencing session read it with
# a COUNT over the buffer, ~2-4 ms with a few thousand fresh rows waiting.
# Statement triggers with transition tables keep it exact whoever writes
# raw_ops (a commit's CTEs, moderation, another worker), and touch the row
# only when the count moves.
_V6: list[str | Only] = [
    Only(
        "postgres",
        "CREATE TABLE raw_ops_pending (id INTEGER PRIMARY KEY CHECK (id = 1), n BIGINT NOT NULL)",
    ),
    Only(
        "postgres",
        "INSERT INTO raw_ops_pending (id, n) "
        "SELECT 1, COUNT(*) FROM raw_ops WHERE waits_for IS NOT NULL",
    ),
    Only(
        "postgres",
        """CREATE FUNCTION raw_ops_pending_moved() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        DECLARE delta BIGINT := 0;
        BEGIN
            IF TG_OP IN ('INSERT', 'UPDATE') THEN
                delta := delta + (SELECT COUNT(*) FROM new_rows WHERE waits_for IS NOT NULL);
            END IF;
            IF TG_OP IN ('DELETE', 'UPDATE') THEN
                delta := delta - (SELECT COUNT(*) FROM old_rows WHERE waits_for IS NOT NULL);
            END IF;
            IF delta <> 0 THEN
                UPDATE raw_ops_pending SET n = n + delta WHERE id = 1;
            END IF;
            RETURN NULL;
        END $$""",
    ),
    Only(
        "postgres",
        "CREATE TRIGGER raw_ops_pending_insert AFTER INSERT ON raw_ops "
        "REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION raw_ops_pending_moved()",
    ),
    Only(
        "postgres",
        "CREATE TRIGGER raw_ops_pending_update AFTER UPDATE ON raw_ops "
        "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION raw_ops_pending_moved()",
    ),
    Only(
        "postgres",
        "CREATE TRIGGER raw_ops_pending_delete AFTER DELETE ON raw_ops "
        "REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION raw_ops_pending_moved()",
    ),
]

# Other tokens of a buffered CID (copies: two senders' tokens of one payload,
# of which only one may verify), kept beside the op buffered under the CID
# and deleted with it by a trigger, whoever deletes it (a commit, a drop by
# an operator, a purge). On Postgres they count in the kept pending count.
_V7: list[str | Only] = [
    """CREATE TABLE raw_copies (
        cid TEXT NOT NULL,
        token_hash TEXT NOT NULL,
        token TEXT NOT NULL,
        since_ms {BIGINT},
        PRIMARY KEY (cid, token_hash))""",
    Only(
        "sqlite",
        "CREATE TRIGGER raw_copies_follow AFTER DELETE ON raw_ops "
        "BEGIN DELETE FROM raw_copies WHERE cid = OLD.cid; END",
    ),
    Only(
        "postgres",
        """CREATE FUNCTION raw_copies_follow() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        BEGIN
            IF EXISTS (SELECT 1 FROM raw_copies) THEN
                DELETE FROM raw_copies c USING old_rows o WHERE c.cid = o.cid;
            END IF;
            RETURN NULL;
        END $$""",
    ),
    Only(
        "postgres",
        "CREATE TRIGGER raw_copies_follow AFTER DELETE ON raw_ops "
        "REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION raw_copies_follow()",
    ),
    Only(
        "postgres",
        """CREATE FUNCTION raw_copies_moved() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        DECLARE delta BIGINT := 0;
        BEGIN
            IF TG_OP = 'INSERT' THEN
                delta := (SELECT COUNT(*) FROM new_rows);
            ELSE
                delta := -(SELECT COUNT(*) FROM old_rows);
            END IF;
            IF delta <> 0 THEN
                UPDATE raw_ops_pending SET n = n + delta WHERE id = 1;
            END IF;
            RETURN NULL;
        END $$""",
    ),
    Only(
        "postgres",
        "CREATE TRIGGER raw_copies_insert AFTER INSERT ON raw_copies "
        "REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION raw_copies_moved()",
    ),
    Only(
        "postgres",
        "CREATE TRIGGER raw_copies_delete AFTER DELETE ON raw_copies "
        "REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION raw_copies_moved()",
    ),
]

# The log's head counts purged positions too (they are never given again):
# its highest purged position is one index read, like the ops' own.
_V8 = ["CREATE INDEX purged_ops_pos ON purged_ops (pos)"]

# A chain's tips (its ops that no op names as parent) by one probe per op
# instead of reading every op of the chain (``stores.sql.forks``).
# With the position: a child is found as of a snapshot by this index alone
# (a planner may otherwise AND it with a range scan of the whole log).
_V9 = ["CREATE INDEX ops_children ON ops (parent_cid, pos) WHERE parent_cid IS NOT NULL"]

# Postgres only: the server start the store last saw, and whether commits
# were asynchronous (``synchronous_commit=off``) under it: a crash of the
# server may then have lost the last ones, so another start means a new feed
# epoch (``stores.postgres_server_start``). NULL: not seen yet.
_V10: list[str | Only] = [
    Only(
        "postgres",
        "CREATE TABLE server_start (id INTEGER PRIMARY KEY CHECK (id = 1), "
        "started TIMESTAMPTZ, async_commits BOOLEAN NOT NULL)",
    ),
    Only(
        "postgres", "INSERT INTO server_start (id, started, async_commits) VALUES (1, NULL, false)"
    ),
]

# Postgres only: the log's head when the recorded start was first seen
# (``first_head``), and whether a new feed epoch was started for that start
# (``renewed``): a process that knew a seq past that head finds its commits
# lost, and starts one epoch for the loss, whichever process finds it first.
# ``noted`` is the start both describe: a v10 relay still running records a
# start without them. NULL: not noted yet.
_V11: list[str | Only] = [
    Only(
        "postgres",
        "ALTER TABLE server_start ADD COLUMN noted TIMESTAMPTZ, "
        "ADD COLUMN first_head BIGINT, ADD COLUMN renewed BOOLEAN NOT NULL DEFAULT false",
    ),
]

# Each process's share of an out-link (``stores.base.OutMark``): one shared
# row, last write wins, let one process vouch for ops another had not pushed.
# An out-link row written before becomes a share left behind (updated_ms 0):
# the next process to start takes its watermark as its floor, as it did.
_MARK_COLS = (
    "peer_url, scope_id, writer, state, received_token, applied_token, pending_tokens, "
    "failures, last_success_ms, last_failure_ms, last_error, caught_up_ms, updated_ms"
)
_V12 = [
    """CREATE TABLE out_link_marks (
        peer_url TEXT NOT NULL,
        scope_id TEXT NOT NULL,
        writer TEXT NOT NULL,
        state TEXT NOT NULL,
        received_token TEXT,
        applied_token TEXT,
        pending_tokens TEXT NOT NULL,
        failures INTEGER NOT NULL,
        last_success_ms {BIGINT},
        last_failure_ms {BIGINT},
        last_error TEXT,
        caught_up_ms {BIGINT},
        updated_ms {BIGINT} NOT NULL,
        PRIMARY KEY (peer_url, scope_id, writer))""",
    f"INSERT INTO out_link_marks ({_MARK_COLS}) SELECT peer_url, scope_id, 'before-v12', "
    "state, received_token, applied_token, pending_tokens, failures, last_success_ms, "
    "last_failure_ms, last_error, caught_up_ms, 0 FROM peer_links WHERE direction = 'out'",
]

# A purge runs in steps, each its own transaction: the purges a step began
# and none finished (a crash cut them short), finished at the next start.
_V13 = ["CREATE TABLE purges_under_way (did TEXT PRIMARY KEY, at_ms {BIGINT} NOT NULL)"]


# Ban changes: a worker's cached ban list re-read every ban each second
# (100 000 rows for a large spam list, per worker); it now reads the DIDs
# changed since the mark it saw. Triggers write the marks, whoever changes
# ``bans``. The count's row is locked by each change until its commit, so
# marks follow commit order and a reader that saw a mark has seen every
# change before it. An unban leaves the DID's row (its mark says it was
# lifted): one row per DID ever banned. Bans already held share mark 1.
# (The three helpers below belong to v14: a later version writes its own.)
def _v14_sqlite_trigger(event: str, row: str) -> str:
    return (
        f"CREATE TRIGGER bans_{event.lower()}_changes AFTER {event} ON bans BEGIN "
        "UPDATE ban_change_count SET n = n + 1 WHERE id = 1; "
        f"INSERT INTO ban_changes (did, n) VALUES ({row}.did, "
        "(SELECT n FROM ban_change_count WHERE id = 1)) "
        "ON CONFLICT (did) DO UPDATE SET n = excluded.n; END"
    )


def _v14_pg_trigger(event: str, rows: str) -> str:
    table = "OLD TABLE AS old_rows" if rows == "old_rows" else "NEW TABLE AS new_rows"
    return (
        f"CREATE TRIGGER bans_{event.lower()}_changes AFTER {event} ON bans "
        f"REFERENCING {table} FOR EACH STATEMENT EXECUTE FUNCTION bans_changed_{rows}()"
    )


def _v14_pg_function(rows: str) -> str:
    # one mark per statement (a bulk ban is one change), none when no row changed
    return f"""CREATE FUNCTION bans_changed_{rows}() RETURNS trigger LANGUAGE plpgsql
        SET search_path FROM CURRENT AS $$
        DECLARE mark BIGINT;
        BEGIN
            IF EXISTS (SELECT 1 FROM {rows}) THEN
                UPDATE ban_change_count SET n = n + 1 WHERE id = 1 RETURNING n INTO mark;
                INSERT INTO ban_changes (did, n) SELECT did, mark FROM {rows}
                    ON CONFLICT (did) DO UPDATE SET n = excluded.n;
            END IF;
            RETURN NULL;
        END $$"""


_V14: list[str | Only] = [
    "CREATE TABLE ban_changes (did TEXT PRIMARY KEY, n {BIGINT} NOT NULL)",
    "CREATE INDEX ban_changes_n ON ban_changes (n)",
    """CREATE TABLE ban_change_count (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        n {BIGINT} NOT NULL)""",
    "INSERT INTO ban_change_count (id, n) VALUES (1, 1)",
    "INSERT INTO ban_changes (did, n) SELECT did, 1 FROM bans",
    Only("sqlite", _v14_sqlite_trigger("INSERT", "NEW")),
    Only("sqlite", _v14_sqlite_trigger("UPDATE", "NEW")),
    Only("sqlite", _v14_sqlite_trigger("DELETE", "OLD")),
    Only("postgres", _v14_pg_function("new_rows")),
    Only("postgres", _v14_pg_function("old_rows")),
    Only("postgres", _v14_pg_trigger("INSERT", "new_rows")),
    Only("postgres", _v14_pg_trigger("UPDATE", "new_rows")),
    Only("postgres", _v14_pg_trigger("DELETE", "old_rows")),
]

# A purge step deletes the countersignatures and beacons of the ops it removes,
# by the op's CID: without an index each step scanned both tables whole (one
# row per countersignature, one per DID), so a purge in N steps read them N
# times.
_V15 = [
    "CREATE INDEX countersigs_cid ON countersigs (cid)",
    "CREATE INDEX beacons_cid ON beacons (cid)",
]

# version -> statements; append new versions, never edit released ones.
MIGRATIONS: dict[int, Sequence[str | Only]] = {
    1: _V1,
    2: _V2,
    3: _V3,
    4: _V4,
    5: _V5,
    6: _V6,
    7: _V7,
    8: _V8,
    9: _V9,
    10: _V10,
    11: _V11,
    12: _V12,
    13: _V13,
    14: _V14,
    15: _V15,
}
LATEST_VERSION = max(MIGRATIONS)


def pending_migrations(current: int | None, dialect: Dialect, where: str) -> list[list[str]]:
    """Statements (rendered) for each version after ``current``, in order.

    ``where`` names the database in the error for a newer schema.
    """
    version = current or 0
    if version > LATEST_VERSION:
        raise StoreError(
            f"{where} has schema version {version}, newer than this relay supports "
            f"({LATEST_VERSION}); upgrade the relay (nothing was changed)"
        )
    steps = []
    for v in range(version + 1, LATEST_VERSION + 1):
        stmts = [
            dialect.render(s) if isinstance(s, str) else s.sql
            for s in MIGRATIONS[v]
            if isinstance(s, str) or s.dialect == dialect.name
        ]
        stmts.append(f"INSERT INTO schema_version (version) VALUES ({v})")
        steps.append(stmts)
    return steps
