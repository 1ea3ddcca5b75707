"""Records <-> rows. State snapshots are stored as compact JSON text."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from typing import Any, cast

import orjson

from stores.base import (
    BeaconRecord,
    ChainKind,
    ChainRecord,
    CommitBatch,
    FeedEntry,
    IdentityKeyRecord,
    LogEntry,
    OperationKind,
    OperationRecord,
    OpLocation,
    PendingOp,
    Rejection,
    RejectionNote,
    RelayIdentityRecord,
    StateRows,
)

Row = Sequence[Any]


def dump_state(state: dict[str, Any] | None) -> str | None:
    if state is None:
        return None
    try:  # orjson: several times faster; json for what it cannot hold (huge ints)
        return orjson.dumps(state).decode()
    except TypeError:
        return json.dumps(state, separators=(",", ":"))


_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))


def load_state(text: str) -> Any:
    """``json.loads``, by orjson unless a run of 19 digits may be an integer
    beyond 64 bits (orjson makes those floats)."""
    raw = text.encode()
    if b"0" * 19 in raw.translate(_DIGITS_AS_ZERO):
        return json.loads(text)
    return orjson.loads(raw)


def op_row(pos: int, op: OperationRecord) -> tuple[Any, ...]:
    return (
        pos,
        op.cid,
        op.jws_token,
        op.kind,
        op.chain_id,
        op.author_did,
        op.parent_cid,
        op.created_at_ms,
        dump_state(op.state),
    )


def op_record(row: Row) -> OperationRecord:
    """From the ``OP_COLS`` columns (the last one is ``pos``, the seq)."""
    state = None if row[7] is None else load_state(row[7])
    kind = cast(OperationKind, row[2])
    return OperationRecord(
        row[0], row[1], kind, row[3], row[4], row[5], int(row[6]), state, int(row[8])
    )


def chain_row(c: ChainRecord) -> tuple[Any, ...]:
    state = dump_state(c.state)
    return (c.chain_id, c.kind, c.genesis_cid, c.head_cid, c.head_created_at_ms, state)


def chain_record(row: Row) -> ChainRecord:
    kind = cast(ChainKind, row[1])
    return ChainRecord(row[0], kind, row[2], row[3], int(row[4]), load_state(row[5]))


def beacon_record(row: Row) -> BeaconRecord:
    return BeaconRecord(row[0], row[1], row[2], int(row[3]))


def key_record(row: Row) -> IdentityKeyRecord:
    return IdentityKeyRecord(row[0], row[1], row[2])


def keys_by_did(rows: Iterable[Row]) -> dict[str, list[IdentityKeyRecord]]:
    """Rows of (did, key id, multikey) as each DID's key records, in row order."""
    out: dict[str, list[IdentityKeyRecord]] = {}
    for r in rows:
        out.setdefault(r[0], []).append(key_record(r))
    return out


def rejection_record(row: Row) -> Rejection:
    return Rejection(row[0], row[1], row[2])


def feed_entry(row: Row) -> FeedEntry:
    state = row[8]
    return FeedEntry(
        int(row[0]),
        row[1],
        row[2],
        cast(OperationKind, row[3]),
        row[4],
        row[5],
        int(row[6]),
        row[7],
        None if state is None else load_state(state),
    )


def log_entry(row: Row) -> LogEntry:
    return LogEntry(row[0], row[1], cast(OperationKind, row[2]), row[3], int(row[4]))


def pending_op(row: Row) -> PendingOp:
    """From (cid, token, waits_for[, since_ms[, received_at_ms]])."""
    since = row[3] if len(row) > 3 else None
    received = int(row[4]) if len(row) > 4 and row[4] is not None else 0
    return PendingOp(row[0], row[1], row[2] or "", None if since is None else int(since), received)


def waiting_row(p: PendingOp) -> tuple[str, str, str, int | None, bool]:
    return (p.cid, p.jws_token, p.waits_for, p.since_ms, p.replaces)


def copy_row(token_hash: str, p: PendingOp) -> tuple[str, str, str, int | None]:
    return (p.cid, token_hash, p.jws_token, p.since_ms)


def copy_record(row: Row) -> tuple[str, PendingOp]:
    """From (cid, token_hash, token, since_ms): the token hash and the copy."""
    since = row[3]
    return row[1], PendingOp(row[0], row[2], "", None if since is None else int(since))


def location(row: Row) -> OpLocation:
    return OpLocation(row[0], cast(OperationKind, row[1]), row[2], int(row[3]))


def note_record(row: Row) -> RejectionNote:
    return RejectionNote(row[0], row[1], row[2], int(row[3]), row[4])


def note_row(n: RejectionNote) -> tuple[str, str, str, int, str]:
    return (n.cid, n.reason, n.detail, n.at_ms, n.token_hash)


def identity_record(row: Row) -> RelayIdentityRecord:
    return RelayIdentityRecord(row[0], row[1], bytes(row[2]), row[3], row[4])


def commit_columns(batch: CommitBatch) -> list[list[Any]]:
    """``batch`` as the column arrays of ``Queries.commit_arrays`` (or of
    ``commit_arrays_copies``, for a batch with copies), in order."""
    ops = [op_row(0, op)[1:] for op in batch.operations]
    chains = [chain_row(c) for c in batch.chains.values()]
    keys = list(
        dict.fromkeys((k.did, k.key_id, k.public_key_multibase) for k in batch.identity_keys)
    )
    beacons = [(b.did, b.cid, b.jws_token, b.created_at_ms) for b in batch.beacons.values()]
    sigs: dict[tuple[str, str], tuple[str, str, str, str]] = {}
    for c in batch.countersignatures:  # the first per (target, witness) wins, as in SQL
        sigs.setdefault(
            (c.target_cid, c.witness_did), (c.target_cid, c.witness_did, c.cid, c.jws_token)
        )
    rejections = {r.token_hash: (r.token_hash, r.cid, r.reason) for r in batch.rejections}
    waiting = [waiting_row(p)[:4] for p in batch.waiting.values()]  # replaces: by CID below
    # As with separate statements (delete, then upsert), a CID in both sets
    # ends up waiting; one statement must not touch a row twice.
    resolved = sorted(batch.resolved_cids - batch.waiting.keys())
    out: list[list[Any]] = []
    for rows, width in (
        (ops, 8),
        (chains, 6),
        (keys, 3),
        (beacons, 4),
        (list(sigs.values()), 4),
        (list(rejections.values()), 3),
    ):
        out.extend(_columns(rows, width))
    out.append(resolved)
    out.extend(_columns(waiting, 4))
    out.append([p.cid for p in batch.waiting.values() if p.replaces])
    if batch.copies or batch.copies_gone:  # ``Queries.commit_arrays_copies``
        out.extend(_columns(sorted(batch.copies_gone), 2))
        copies = [copy_row(h, p) for (_, h), p in batch.kept_copies().items()]
        out.extend(_columns(copies, 4))
    return out


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    if not rows:
        return [[] for _ in range(width)]
    return [list(column) for column in zip(*rows, strict=True)]


def state_rows(tagged: Sequence[Row], wanted_pairs: Collection[tuple[str, str]]) -> StateRows:
    """``StateRows`` from the tagged rows of ``Queries.read_state_arrays``."""
    out = StateRows()
    keys: list[tuple[int, IdentityKeyRecord]] = []
    for row in tagged:
        tag = row[0]
        if tag == "o":
            out.operations[row[1]] = op_record(row[1:10])
        elif tag == "c":
            out.chains[row[1]] = chain_record(row[1:7])
        elif tag == "k":
            keys.append((int(row[4]), key_record(row[1:4])))
        elif tag == "b":
            out.beacons[row[1]] = beacon_record(row[1:5])
        elif tag == "p":
            out.pairs.add((row[1], row[2]))
        elif tag == "r":
            out.rejections[row[1]] = rejection_record(row[1:4])
        elif tag == "n":
            out.pending = int(row[1])
        elif tag == "w":
            out.buffered[row[1]] = row[2]
        elif tag == "y":
            out.copies.setdefault(row[1], set()).add(row[2])
        elif tag == "x":
            out.bans[row[1]] = row[2]
    out.pairs &= set(wanted_pairs)
    for _, key in sorted(keys, key=lambda item: item[0]):  # history order
        out.identity_keys.setdefault(key.did, []).append(key)
    return out
