"""Every query of the durable stores, written once and rendered per dialect."""

from __future__ import annotations

from dataclasses import dataclass, fields

from stores.sql.dialect import Dialect

OP_COLS = "cid, token, kind, chain_id, author_did, parent_cid, created_at_ms, state, pos"
FEED_COLS = "pos, cid, token, kind, chain_id, author_did, created_at_ms, parent_cid, state"
CHAIN_COLS = "chain_id, kind, genesis_cid, head_cid, head_created_at_ms, state"
CHAIN_KINDS_SQL = "kind IN ('identity-op', 'content-op')"
STANDALONE_KINDS_SQL = "kind IN ('beacon', 'artifact', 'countersign')"
# creator DIDs of the content chains in CTE ``ch`` (an array: index scans).
# A state may hold the escape \u0000 (a documentCID is any string), which
# Postgres refuses to read as text out of any field of the object: it is made
# \u0001 first, changing one digit, so the JSON stays valid (an escaped
# backslash before "u0000" too). No DID holds NUL: the creator reads the same.
_CREATORS = (
    "ARRAY(SELECT CAST(replace(state, '\\u0000', '\\u0001') AS json) ->> 'creator_did' "
    "FROM ch WHERE kind = 'content')"
)


# The log's head seq: the highest position given to an op, the purged ones
# included, so a purge never hands its positions out again (two index reads).
# The ops are read only above the highest purged position: a purge of the
# log's tail leaves its rows dead in the index until a VACUUM (Postgres;
# autovacuum may be off, or a snapshot held keeps them), and a bare MAX(pos)
# walked every one of them, each step of the purge and each commit after it.
HEAD_POS = (
    "(SELECT COALESCE((SELECT MAX(pos) FROM ops WHERE pos > purged.top), purged.top) "
    "FROM (SELECT COALESCE(MAX(pos), 0) AS top FROM purged_ops) AS purged)"
)
# what a commit statement answers: the log's head seq after it
# A waiting op keeps the time it started waiting, except when it is kept
# through a write-policy error: it then starts waiting for the policy (the
# relay gives up on it that long after, ``WritePolicy.retry_give_up_s``).
_SINCE_KEPT = (
    "CASE WHEN excluded.waits_for LIKE 'policy:%' "
    "AND COALESCE(raw_ops.waits_for, '') NOT LIKE 'policy:%' THEN excluded.since_ms "
    "ELSE COALESCE(raw_ops.since_ms, excluded.since_ms) END"
)
_COMMIT_ANSWER = f"SELECT COALESCE((SELECT MAX(pos) FROM new_ops), {HEAD_POS})"


@dataclass(frozen=True, slots=True)
class Queries:
    # proof reader
    get_op: str = f"SELECT {OP_COLS} FROM ops WHERE cid = ?"
    get_chain: str = f"SELECT {CHAIN_COLS} FROM chains WHERE chain_id = ?"
    get_beacon: str = "SELECT did, cid, token, created_at_ms FROM beacons WHERE did = ?"
    get_countersigs: str = "SELECT token FROM countersigs WHERE target_cid = ? ORDER BY id"
    log_cursor: str = "SELECT pos, chain_id FROM ops WHERE cid = ?"
    log_page: str = (
        "SELECT cid, token, kind, chain_id, pos FROM ops WHERE pos > ? ORDER BY pos LIMIT ?"
    )
    chain_log_page: str = (
        "SELECT cid, token, kind, chain_id, pos FROM ops "
        f"WHERE chain_id = ? AND {CHAIN_KINDS_SQL} AND pos > ? ORDER BY pos LIMIT ?"
    )
    known_cids: str = "SELECT cid FROM ops WHERE cid {IN}"
    # a precheck's reads in one statement (array dialect): tagged rows, keys in
    # history order
    sequenced_and_keys: str = (
        "(SELECT CAST('o' AS text), cid, NULL, NULL, CAST(0 AS bigint) FROM ops "
        "WHERE cid = ANY(CAST(? AS text[]))) UNION ALL (SELECT 'k', did, key_id, multibase, id "
        "FROM identity_keys WHERE did = ANY(CAST(? AS text[])) ORDER BY id)"
    )
    # changes feed
    sync_items: str = "SELECT pos, created_at_ms, cid FROM ops WHERE pos > ? ORDER BY pos LIMIT ?"
    seq_range: str = f"SELECT {FEED_COLS} FROM ops WHERE pos > ? AND pos <= ? ORDER BY pos LIMIT ?"
    roots_first: str = (
        f"SELECT {FEED_COLS} FROM ops WHERE parent_cid IS NULL AND pos <= ? "
        "ORDER BY created_at_ms, cid LIMIT ?"
    )
    roots_after: str = (
        f"SELECT {FEED_COLS} FROM ops WHERE parent_cid IS NULL AND pos <= ? "
        "AND (created_at_ms > ? OR (created_at_ms = ? AND cid > ?)) "
        "ORDER BY created_at_ms, cid LIMIT ?"
    )
    # a chain's entries of some kinds, one statement per partial index
    # (ops_chain_log, ops_standalone): the index's own term is repeated so that
    # SQLite's planner may use it, instead of scanning the log up to ``pos``
    chain_entries: str = (
        f"SELECT {FEED_COLS} FROM ops WHERE chain_id = ? AND kind {{IN}} AND pos <= ? "
        f"AND {CHAIN_KINDS_SQL} ORDER BY pos"
    )
    standalone_entries: str = (
        f"SELECT {FEED_COLS} FROM ops WHERE chain_id = ? AND kind {{IN}} AND pos <= ? "
        f"AND {STANDALONE_KINDS_SQL} ORDER BY pos"
    )
    # a page of many chains' entries: positions in (after, until], at most a limit
    chains_entries_after: str = (
        f"SELECT {FEED_COLS} FROM ops WHERE chain_id {{IN}} AND kind {{IN}} AND pos > ? "
        f"AND pos <= ? AND {CHAIN_KINDS_SQL} ORDER BY pos LIMIT ?"
    )
    standalone_chains_entries_after: str = (
        f"SELECT {FEED_COLS} FROM ops WHERE chain_id {{IN}} AND kind {{IN}} AND pos > ? "
        f"AND pos <= ? AND {STANDALONE_KINDS_SQL} ORDER BY pos LIMIT ?"
    )
    get_epoch: str = "SELECT epoch FROM feed_meta WHERE id = 1"
    init_epoch: str = "INSERT INTO feed_meta (id, epoch) VALUES (1, ?) ON CONFLICT (id) DO NOTHING"
    set_epoch: str = (
        "INSERT INTO feed_meta (id, epoch) VALUES (1, ?) "
        "ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch"
    )
    # positions are given 1, 2, 3, ... and never again, so the head is the length
    max_pos: str = f"SELECT {HEAD_POS}"
    # sequencing session: one round trip per collection
    get_ops: str = f"SELECT {OP_COLS} FROM ops WHERE cid {{IN}}"
    get_chains: str = f"SELECT {CHAIN_COLS} FROM chains WHERE chain_id {{IN}}"
    get_keys: str = "SELECT did, key_id, multibase FROM identity_keys WHERE did {IN} ORDER BY id"
    get_beacons: str = "SELECT did, cid, token, created_at_ms FROM beacons WHERE did {IN}"
    get_pairs: str = "SELECT target_cid, witness_did FROM countersigs WHERE target_cid {IN}"
    get_rejections: str = "SELECT token_hash, cid, reason FROM rejections WHERE token_hash {IN}"
    get_bans: str = "SELECT did, reason FROM bans WHERE did {IN}"
    # the ops waiting for the keys and, transitively, for "op:<cid>" of one
    # found (``waits_for_op``); read only: the session remembers what it took
    take_waiting: str = (
        "WITH RECURSIVE t(cid) AS (SELECT cid FROM raw_ops WHERE waits_for {IN} "
        "UNION SELECT r.cid FROM raw_ops r JOIN t ON r.waits_for = 'op:' || t.cid) "
        "SELECT r.cid, r.token, r.waits_for FROM raw_ops r JOIN t ON r.cid = t.cid"
    )
    # the same in the array dialect: the lateral step keeps Postgres on the
    # waits_for index per row even before the table has statistics
    take_waiting_arrays: str = (
        "WITH RECURSIVE t(cid, token, waits_for) AS (SELECT cid, token, waits_for "
        "FROM raw_ops WHERE waits_for {IN} UNION SELECT r.cid, r.token, r.waits_for "
        "FROM t CROSS JOIN LATERAL (SELECT cid, token, waits_for FROM raw_ops "
        "WHERE waits_for = 'op:' || t.cid OFFSET 0) AS r) SELECT cid, token, waits_for FROM t"
    )
    count_pending: str = (
        "SELECT (SELECT COUNT(*) FROM raw_ops WHERE waits_for IS NOT NULL) "
        "+ (SELECT COUNT(*) FROM raw_copies)"
    )
    get_buffered: str = "SELECT cid, token FROM raw_ops WHERE cid {IN}"
    take_copies: str = "SELECT cid, token_hash, token, since_ms FROM raw_copies WHERE cid {IN}"
    get_copy_hashes: str = "SELECT cid, token_hash FROM raw_copies WHERE cid {IN}"
    any_copies: str = "SELECT EXISTS (SELECT 1 FROM raw_copies)"
    count_copies: str = "SELECT COUNT(*) FROM raw_copies"
    delete_copy: str = "DELETE FROM raw_copies WHERE cid = ? AND token_hash = ?"
    insert_copy: str = (
        "INSERT INTO raw_copies (cid, token_hash, token, since_ms) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (cid, token_hash) DO NOTHING"
    )
    kept_pending_count: str = "SELECT n FROM raw_ops_pending"
    # commit
    insert_op: str = (
        "INSERT INTO ops (pos, cid, token, kind, chain_id, author_did, parent_cid, "
        "created_at_ms, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    upsert_chain: str = (
        f"INSERT INTO chains ({CHAIN_COLS}) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (chain_id) DO UPDATE SET kind = excluded.kind, "
        "genesis_cid = excluded.genesis_cid, head_cid = excluded.head_cid, "
        "head_created_at_ms = excluded.head_created_at_ms, state = excluded.state"
    )
    insert_key: str = (
        "INSERT INTO identity_keys (did, key_id, multibase) VALUES (?, ?, ?) "
        "ON CONFLICT (did, key_id, multibase) DO NOTHING"
    )
    upsert_beacon: str = (
        "INSERT INTO beacons (did, cid, token, created_at_ms) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (did) DO UPDATE SET cid = excluded.cid, token = excluded.token, "
        "created_at_ms = excluded.created_at_ms"
    )
    insert_countersig: str = (
        "INSERT INTO countersigs (target_cid, witness_did, cid, token) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (target_cid, witness_did) DO NOTHING"
    )
    upsert_rejection: str = (
        "INSERT INTO rejections (token_hash, cid, reason) VALUES (?, ?, ?) "
        "ON CONFLICT (token_hash) DO UPDATE SET cid = excluded.cid, reason = excluded.reason"
    )
    delete_raw: str = "DELETE FROM raw_ops WHERE cid {IN}"
    any_raw: str = "SELECT EXISTS (SELECT 1 FROM raw_ops)"
    # an op that keeps waiting keeps the time it started waiting (``_SINCE_KEPT``)
    upsert_waiting: str = (
        "INSERT INTO raw_ops (cid, token, waits_for, taken, since_ms) VALUES (?, ?, ?, 0, ?) "
        "ON CONFLICT (cid) DO UPDATE SET token = excluded.token, "
        "waits_for = excluded.waits_for, taken = 0, "
        f"since_ms = {_SINCE_KEPT} "
        # another token of the CID is replaced only by a verified one
        "WHERE raw_ops.token = excluded.token OR ?"
    )
    # A whole StateQuery as one statement (array dialect): tagged rows of
    # nine text columns. Content ops found bring their chains; content
    # chains found bring their creators' chains and keys (see StateQuery).
    read_state_arrays: str = (
        "WITH o AS (SELECT cid, token, kind, chain_id, author_did, parent_cid, "
        "created_at_ms, state, pos FROM ops WHERE cid = ANY(CAST(? AS text[]))), "
        "ch AS (SELECT chain_id, kind, genesis_cid, head_cid, head_created_at_ms, state "
        "FROM chains WHERE chain_id = ANY(CAST(? AS text[]) || "
        "ARRAY(SELECT chain_id FROM o WHERE kind = 'content-op'))), "
        # the token buffered under each of the query's ``buffered`` CIDs
        "w AS (SELECT cid, token FROM raw_ops WHERE cid = ANY(CAST(? AS text[]))) "
        "SELECT CAST('o' AS text), cid, token, kind, chain_id, author_did, parent_cid, "
        "CAST(created_at_ms AS text), state, CAST(pos AS text) FROM o "
        "UNION ALL SELECT 'c', chain_id, kind, genesis_cid, head_cid, "
        "CAST(head_created_at_ms AS text), state, NULL, NULL, NULL FROM ch "
        "UNION ALL SELECT 'c', chain_id, kind, genesis_cid, head_cid, "
        "CAST(head_created_at_ms AS text), state, NULL, NULL, NULL FROM chains "
        f"WHERE chain_id = ANY({_CREATORS}) "
        "UNION ALL SELECT 'k', did, key_id, multibase, CAST(id AS text), NULL, NULL, NULL, NULL, "
        f"NULL FROM identity_keys WHERE did = ANY(CAST(? AS text[]) || {_CREATORS}) "
        "UNION ALL SELECT 'b', did, cid, token, CAST(created_at_ms AS text), NULL, NULL, NULL, "
        "NULL, NULL FROM beacons WHERE did = ANY(CAST(? AS text[])) "
        "UNION ALL SELECT 'p', target_cid, witness_did, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
        "FROM countersigs WHERE target_cid = ANY(CAST(? AS text[])) "
        "UNION ALL SELECT 'r', token_hash, cid, reason, NULL, NULL, NULL, NULL, NULL, NULL "
        "FROM rejections WHERE token_hash = ANY(CAST(? AS text[])) "
        # the pending count, kept in a row (Postgres, schema v6), when asked
        "UNION ALL SELECT 'n', CAST(n AS text), NULL, NULL, NULL, NULL, NULL, NULL, "
        "NULL, NULL FROM raw_ops_pending WHERE CAST(? AS boolean) "
        "UNION ALL SELECT 'w', cid, token, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM w "
        # and the token hashes of the copies beside them (none read when none is)
        "UNION ALL SELECT 'y', cid, token_hash, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
        "FROM raw_copies WHERE cid IN (SELECT cid FROM w) "
        # the bans of the signers the round's ops claim
        "UNION ALL SELECT 'x', did, reason, NULL, NULL, NULL, NULL, NULL, NULL, NULL "
        "FROM bans WHERE did = ANY(CAST(? AS text[]))"
    )
    # The whole CommitBatch as one statement (one round trip inside the
    # locked transaction): data-modifying CTEs always run to completion.
    # The two raw_ops CTEs touch disjoint rows (resolved vs still waiting).
    commit_arrays: str = (
        "WITH new_ops AS ("
        "INSERT INTO ops (pos, cid, token, kind, chain_id, author_did, parent_cid, "
        f"created_at_ms, state) SELECT {HEAD_POS} + u.n, "
        "u.cid, u.token, u.kind, u.chain_id, u.author_did, u.parent_cid, u.at, u.state "
        "FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), "
        "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), "
        "CAST(? AS text[])) WITH ORDINALITY "
        "AS u(cid, token, kind, chain_id, author_did, parent_cid, at, state, n) RETURNING pos), "
        "new_chains AS ("
        f"INSERT INTO chains ({CHAIN_COLS}) SELECT * FROM unnest(CAST(? AS text[]), "
        "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), "
        "CAST(? AS text[])) "
        "ON CONFLICT (chain_id) DO UPDATE SET kind = excluded.kind, "
        "genesis_cid = excluded.genesis_cid, head_cid = excluded.head_cid, "
        "head_created_at_ms = excluded.head_created_at_ms, state = excluded.state), "
        "new_keys AS ("
        "INSERT INTO identity_keys (did, key_id, multibase) SELECT u.did, u.key_id, u.mb "
        "FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[])) "
        "WITH ORDINALITY AS u(did, key_id, mb, n) ORDER BY u.n "
        "ON CONFLICT (did, key_id, multibase) DO NOTHING), "
        "new_beacons AS ("
        "INSERT INTO beacons (did, cid, token, created_at_ms) SELECT * FROM unnest("
        "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[])) "
        "ON CONFLICT (did) DO UPDATE SET cid = excluded.cid, token = excluded.token, "
        "created_at_ms = excluded.created_at_ms), "
        "new_countersigs AS ("
        "INSERT INTO countersigs (target_cid, witness_did, cid, token) "
        "SELECT u.target, u.witness, u.cid, u.token FROM unnest(CAST(? AS text[]), "
        "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[])) "
        "WITH ORDINALITY AS u(target, witness, cid, token, n) ORDER BY u.n "
        "ON CONFLICT (target_cid, witness_did) DO NOTHING), "
        "new_rejections AS ("
        "INSERT INTO rejections (token_hash, cid, reason) SELECT * FROM unnest("
        "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[])) "
        "ON CONFLICT (token_hash) DO UPDATE SET cid = excluded.cid, reason = excluded.reason), "
        "resolved AS (DELETE FROM raw_ops WHERE cid = ANY(CAST(? AS text[]))), "
        "waiting AS ("
        "INSERT INTO raw_ops (cid, token, waits_for, taken, since_ms) "
        "SELECT u.cid, u.token, u.w, 0, u.since FROM unnest(CAST(? AS text[]), "
        "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[])) AS u(cid, token, w, since) "
        "ON CONFLICT (cid) DO UPDATE SET token = excluded.token, "
        "waits_for = excluded.waits_for, taken = 0, "
        f"since_ms = {_SINCE_KEPT} "
        "WHERE raw_ops.token = excluded.token OR excluded.cid = ANY(CAST(? AS text[]))) "
        f"{_COMMIT_ANSWER}"
    )
    # The same with the batch's copies: disjoint keys gone and kept (the
    # raw_ops trigger deletes the copies of a resolved CID after the
    # statement). Only batches with copies touch raw_copies: its statement
    # triggers fire even for no rows.
    commit_arrays_copies: str = (
        commit_arrays.removesuffix(f" {_COMMIT_ANSWER}") + ", "
        "copies_gone AS (DELETE FROM raw_copies c USING unnest(CAST(? AS text[]), "
        "CAST(? AS text[])) AS u(cid, h) WHERE c.cid = u.cid AND c.token_hash = u.h), "
        "copies AS (INSERT INTO raw_copies (cid, token_hash, token, since_ms) "
        "SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), "
        "CAST(? AS bigint[])) ON CONFLICT (cid, token_hash) DO NOTHING) "
        f"{_COMMIT_ANSWER}"
    )
    # buffers the new ones and answers the CIDs already sequenced
    put_raw_arrays: str = (
        "WITH u AS (SELECT u.cid, u.token, EXISTS (SELECT 1 FROM ops WHERE ops.cid = u.cid) "
        "AS sequenced FROM unnest(CAST(? AS text[]), CAST(? AS text[])) AS u(cid, token)), "
        "buffered AS (INSERT INTO raw_ops (cid, token, received_at_ms) "
        "SELECT cid, token, CAST(? AS bigint) FROM u "
        "WHERE NOT sequenced ON CONFLICT (cid) DO NOTHING) "
        "SELECT cid FROM u WHERE sequenced"
    )
    # raw buffer (never re-buffer an op that is already sequenced)
    put_raw: str = (
        "INSERT INTO raw_ops (cid, token, received_at_ms) "
        "SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS {BIGINT}) "
        "WHERE NOT EXISTS (SELECT 1 FROM ops WHERE cid = ?) ON CONFLICT (cid) DO NOTHING"
    )
    unsequenced: str = (
        "SELECT cid, token, COALESCE(waits_for, ''), since_ms, received_at_ms FROM raw_ops "
        "WHERE cid > ? ORDER BY cid LIMIT ?"
    )
    count_unsequenced: str = "SELECT COUNT(*) FROM raw_ops"
    waiting_for_policy: str = (
        "SELECT cid, token, waits_for, since_ms FROM raw_ops "
        "WHERE waits_for LIKE 'policy:%' AND cid > ? ORDER BY cid LIMIT ?"
    )
    # op status: where an op is, what it waits for, why it was rejected
    locate_ops: str = "SELECT cid, kind, chain_id, pos FROM ops WHERE cid {IN}"
    find_buffered: str = (
        "SELECT cid, token, COALESCE(waits_for, ''), since_ms FROM raw_ops WHERE cid {IN}"
    )
    get_notes: str = (
        "SELECT cid, reason, detail, at_ms, token_hash FROM rejection_notes WHERE cid {IN}"
    )
    # SQLite: REPLACE deletes the old row, so the note gets a new (highest) rowid
    put_note: str = (
        "INSERT OR REPLACE INTO rejection_notes (cid, reason, detail, at_ms, token_hash) "
        "VALUES (?, ?, ?, ?, ?)"
    )
    # Postgres: excluded.n is the sequence value drawn for the proposed row
    put_notes_arrays: str = (
        "INSERT INTO rejection_notes (cid, reason, detail, at_ms, token_hash) "
        "SELECT * FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), "
        "CAST(? AS bigint[]), CAST(? AS text[])) "
        "ON CONFLICT (cid) DO UPDATE SET n = excluded.n, reason = excluded.reason, "
        "detail = excluded.detail, at_ms = excluded.at_ms, token_hash = excluded.token_hash"
    )
    prune_notes: str = (
        "DELETE FROM rejection_notes WHERE n <= (SELECT MAX(n) FROM rejection_notes) - ?"
    )
    oldest_waiting: str = (
        "SELECT cid, token, waits_for, since_ms FROM raw_ops "
        "WHERE waits_for IS NOT NULL AND since_ms IS NOT NULL ORDER BY since_ms, cid LIMIT 1"
    )
    # blobs, cursors, identity
    get_blob: str = "SELECT data FROM blobs WHERE creator_did = ? AND document_cid = ?"
    put_blob: str = (
        "INSERT INTO blobs (creator_did, document_cid, data) VALUES (?, ?, ?) "
        "ON CONFLICT (creator_did, document_cid) DO NOTHING"
    )
    get_cursor: str = "SELECT cursor FROM peer_cursors WHERE peer_url = ?"
    list_cursors: str = "SELECT peer_url, cursor FROM peer_cursors ORDER BY peer_url"
    set_cursor: str = (
        "INSERT INTO peer_cursors (peer_url, cursor) VALUES (?, ?) "
        "ON CONFLICT (peer_url) DO UPDATE SET cursor = excluded.cursor"
    )
    get_identity: str = (
        "SELECT did, key_id, seed, genesis_token, profile_token FROM relay_identity WHERE id = 1"
    )
    put_identity: str = (
        "INSERT INTO relay_identity (id, did, key_id, seed, genesis_token, profile_token) "
        "VALUES (1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
    )


# Buffered ops by dependency kind ('' = not yet attempted), then one
# "at or before cutoff i" count per cutoff (see ``PendingSummary``).
DEPENDENCY_KIND_SQL = (
    "CASE WHEN waits_for IS NULL OR waits_for = '' THEN '' "
    "WHEN waits_for LIKE 'op:%' THEN 'op' WHEN waits_for LIKE 'policy:%' THEN 'policy' "
    "ELSE 'did' END"
)


def pending_summary_sql(dialect: Dialect, n_cutoffs: int) -> str:
    older = "".join(
        ", SUM(CASE WHEN since_ms <= CAST(? AS {BIGINT}) THEN 1 ELSE 0 END)"
        for _ in range(n_cutoffs)
    )
    return dialect.render(f"SELECT {DEPENDENCY_KIND_SQL}, COUNT(*){older} FROM raw_ops GROUP BY 1")


def render_queries(dialect: Dialect) -> Queries:
    """The query set with placeholders and list membership in ``dialect``."""
    base = Queries()
    rendered = {f.name: dialect.render(getattr(base, f.name)) for f in fields(Queries)}
    return Queries(**rendered)
