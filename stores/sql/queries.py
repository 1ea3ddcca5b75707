"""Every query of the durable stores, written once and rendered per dialect."""

from __future__ import annotations

from dataclasses import dataclass, fields

from stores.sql.dialect import Dialect

OP_COLS = "cid, token, kind, chain_id, author_did, parent_cid, created_at_ms, state"
CHAIN_COLS = "chain_id, kind, genesis_cid, head_cid, head_created_at_ms, state"
CHAIN_KINDS_SQL = "kind IN ('identity-op', 'content-op')"


@dataclass(frozen=True, slots=True)
class Queries:
    # proof reader
    get_op: str = f"SELECT {OP_COLS} FROM ops WHERE cid = ?"
    get_chain: str = f"SELECT {CHAIN_COLS} FROM chains WHERE chain_id = ?"
    get_beacon: str = "SELECT did, cid, token, created_at_ms FROM beacons WHERE did = ?"
    get_countersigs: str = "SELECT token FROM countersigs WHERE target_cid = ? ORDER BY id"
    log_cursor: str = "SELECT pos, chain_id FROM ops WHERE cid = ?"
    log_page: str = "SELECT cid, token, kind, chain_id FROM ops WHERE pos > ? ORDER BY pos LIMIT ?"
    chain_log_page: str = (
        "SELECT cid, token, kind, chain_id FROM ops "
        f"WHERE chain_id = ? AND {CHAIN_KINDS_SQL} AND pos > ? ORDER BY pos LIMIT ?"
    )
    known_cids: str = "SELECT cid FROM ops WHERE cid {IN}"
    # positions are gapless 1..n, so the max is the length (no table scan)
    max_pos: str = "SELECT COALESCE(MAX(pos), 0) FROM ops"
    # sequencing session: one round trip per collection
    get_ops: str = f"SELECT {OP_COLS} FROM ops WHERE cid {{IN}}"
    get_chains: str = f"SELECT {CHAIN_COLS} FROM chains WHERE chain_id {{IN}}"
    get_keys: str = "SELECT did, key_id, multibase FROM identity_keys WHERE did {IN} ORDER BY id"
    get_beacons: str = "SELECT did, cid, token, created_at_ms FROM beacons WHERE did {IN}"
    get_pairs: str = "SELECT target_cid, witness_did FROM countersigs WHERE target_cid {IN}"
    get_rejections: str = "SELECT token_hash, cid, reason FROM rejections WHERE token_hash {IN}"
    take_waiting: str = (
        "UPDATE raw_ops SET taken = 1 WHERE waits_for {IN} AND taken = 0 "
        "RETURNING cid, token, waits_for"
    )
    count_pending: str = "SELECT COUNT(*) FROM raw_ops WHERE waits_for IS NOT NULL"
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
    upsert_waiting: str = (
        "INSERT INTO raw_ops (cid, token, waits_for, taken) VALUES (?, ?, ?, 0) "
        "ON CONFLICT (cid) DO UPDATE SET token = excluded.token, "
        "waits_for = excluded.waits_for, taken = 0"
    )
    # array forms (Postgres): a whole batch in one statement, positions inline
    insert_ops_arrays: str = (
        "INSERT INTO ops (pos, cid, token, kind, chain_id, author_did, parent_cid, "
        "created_at_ms, state) SELECT (SELECT COALESCE(MAX(pos), 0) FROM ops) + u.n, "
        "u.cid, u.token, u.kind, u.chain_id, u.author_did, u.parent_cid, u.at, u.state "
        "FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), "
        "CAST(? AS text[]), CAST(? AS text[]), CAST(? AS text[]), CAST(? AS bigint[]), "
        "CAST(? AS text[])) WITH ORDINALITY "
        "AS u(cid, token, kind, chain_id, author_did, parent_cid, at, state, n)"
    )
    put_raw_arrays: str = (
        "INSERT INTO raw_ops (cid, token) SELECT u.cid, u.token "
        "FROM unnest(CAST(? AS text[]), CAST(? AS text[])) AS u(cid, token) "
        "WHERE NOT EXISTS (SELECT 1 FROM ops WHERE ops.cid = u.cid) "
        "ON CONFLICT (cid) DO NOTHING"
    )
    # raw buffer (never re-buffer an op that is already sequenced)
    put_raw: str = (
        "INSERT INTO raw_ops (cid, token) SELECT CAST(? AS TEXT), CAST(? AS TEXT) "
        "WHERE NOT EXISTS (SELECT 1 FROM ops WHERE cid = ?) ON CONFLICT (cid) DO NOTHING"
    )
    unsequenced: str = (
        "SELECT cid, token, COALESCE(waits_for, '') FROM raw_ops WHERE cid > ? ORDER BY cid LIMIT ?"
    )
    count_unsequenced: str = "SELECT COUNT(*) FROM raw_ops"
    # blobs, cursors, identity
    get_blob: str = "SELECT data FROM blobs WHERE creator_did = ? AND document_cid = ?"
    put_blob: str = (
        "INSERT INTO blobs (creator_did, document_cid, data) VALUES (?, ?, ?) "
        "ON CONFLICT (creator_did, document_cid) DO NOTHING"
    )
    get_cursor: str = "SELECT cursor FROM peer_cursors WHERE peer_url = ?"
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


def render_queries(dialect: Dialect) -> Queries:
    """The query set with placeholders and list membership in ``dialect``."""
    base = Queries()
    rendered = {f.name: dialect.render(getattr(base, f.name)) for f in fields(Queries)}
    return Queries(**rendered)
