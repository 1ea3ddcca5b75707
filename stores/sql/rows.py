"""Records <-> rows. State snapshots are stored as compact JSON text."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from stores.base import (
    BeaconRecord,
    ChainKind,
    ChainRecord,
    IdentityKeyRecord,
    LogEntry,
    OperationKind,
    OperationRecord,
    PendingOp,
    Rejection,
    RelayIdentityRecord,
)

Row = Sequence[Any]


def dump_state(state: dict[str, Any] | None) -> str | None:
    return None if state is None else json.dumps(state, separators=(",", ":"))


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
    state = None if row[7] is None else json.loads(row[7])
    kind = cast(OperationKind, row[2])
    return OperationRecord(row[0], row[1], kind, row[3], row[4], row[5], int(row[6]), state)


def chain_row(c: ChainRecord) -> tuple[Any, ...]:
    state = dump_state(c.state)
    return (c.chain_id, c.kind, c.genesis_cid, c.head_cid, c.head_created_at_ms, state)


def chain_record(row: Row) -> ChainRecord:
    kind = cast(ChainKind, row[1])
    return ChainRecord(row[0], kind, row[2], row[3], int(row[4]), json.loads(row[5]))


def beacon_record(row: Row) -> BeaconRecord:
    return BeaconRecord(row[0], row[1], row[2], int(row[3]))


def key_record(row: Row) -> IdentityKeyRecord:
    return IdentityKeyRecord(row[0], row[1], row[2])


def rejection_record(row: Row) -> Rejection:
    return Rejection(row[0], row[1], row[2])


def log_entry(row: Row) -> LogEntry:
    return LogEntry(row[0], row[1], cast(OperationKind, row[2]), row[3])


def pending_op(row: Row) -> PendingOp:
    return PendingOp(row[0], row[1], row[2])


def identity_record(row: Row) -> RelayIdentityRecord:
    return RelayIdentityRecord(row[0], row[1], bytes(row[2]), row[3], row[4])
