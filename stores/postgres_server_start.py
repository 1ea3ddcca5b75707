"""Whether the Postgres server changed in a way that may have lost the
relay's commits: after asynchronous commits, or with commits it knew gone.

With ``synchronous_commit=off`` (chosen in the store URL) a commit returns
before its WAL is flushed, so a crash of the database server or its host may
lose the last commits. A failover to a standby that had not received the last
commits (asynchronous replication) loses them whatever the old primary's
setting. Their seqs are then given again, to other ops, and a feed follower
holding a token past the surviving head would resume past ops it never saw
without a gap being named: the feed's epoch must change.

``server_start`` records the server start (``pg_postmaster_start_time()``)
the store last saw, whether any connection ran with asynchronous commits
under it, the log's head when it was first seen (``first_head``) and whether
a new epoch was started for it (``renewed``). Every new connection checks
before it is used (the store's open, and each connection the pool opens
later, as after the server restarted or failed over under a running relay),
given what its process knows (``Known``: the highest seq it committed or read
as the head, and the start it learned it under):
- the same start, known to the process: nothing to do (one read, no write);
- another start after asynchronous commits: a new feed epoch, and a warning;
- a start the process had not seen, whose first head is below a seq it knew
  committed: those commits were lost, a new epoch (once per start: not when
  one was started for it already, by this or another process), and a warning
  naming both seqs, whatever the asynchronous flag says;
- otherwise the new start (and its head) is recorded, the epoch kept.
Each write is one transaction that waits for the WAL flush (the epoch is
durable before any op takes a seq under it). Concurrent checks (connections,
processes) serialize on the row and decide on it as re-read under the lock.
The process then forgets what it knew past the first head: those seqs will be
given again, under the new epoch.

Only ``off`` counts as asynchronous: ``local``, ``remote_write``, ``on`` and
``remote_apply`` all wait for the local WAL flush. The flag sticks for the
start: a relay with synchronous commits still starts a new epoch after a
restart that followed asynchronous ones (another process's, or its own before
it was reconfigured).

Conservative: a clean restart (or a switchover to another server) after
asynchronous commits also starts a new epoch, and followers bootstrap again.
SQL cannot cheaply and reliably tell a crash recovery from a clean start: the
server log says it, no function does; ``pg_control_checkpoint()`` shows an
end-of-recovery checkpoint only until the next checkpoint replaces it, and
needs privileges a relay's role may lack.

Not detected: a loss of commits no process that reaches the new server knew
of (each knows its own commits and the heads it read; a process that reaches
it later finds the loss then, and the epoch changes late: followers of the
old one may have read ops given the lost seqs meanwhile); a process that
missed a whole start (two server changes before it reconnects) compares
with the latest one, and may start an epoch the previous one's already
covered. The knowledge is the process's memory: a restarted relay knows
nothing. A store upgraded from schema v9 holds no start (NULL): the first one
seen is recorded without a new epoch for asynchronous commits (a crash before
that is the operator's to handle, as it was: ``dfos-relay feed reset-epoch``).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime

from stores.epoch import new_epoch
from stores.sql.conn import Conn
from stores.sql.queries import HEAD_POS

log = logging.getLogger("dfos_relay")

READ = (
    "SELECT started, async_commits, pg_postmaster_start_time(), "
    "current_setting('synchronous_commit') = 'off' FROM server_start WHERE id = 1"
)
# the session's own setting is read before: SET LOCAL changes what it shows
BEGIN_DURABLY = "BEGIN; SET LOCAL synchronous_commit = on"
LOCK = (
    "SELECT started, async_commits, noted, first_head, renewed "
    "FROM server_start WHERE id = 1 FOR UPDATE"
)
HEAD = f"SELECT {HEAD_POS}"
RECORD = (
    "UPDATE server_start SET started = $1, async_commits = $2, noted = $1, "
    "first_head = $3, renewed = $4 WHERE id = 1"
)
NEW_EPOCH = "UPDATE feed_meta SET epoch = $1 WHERE id = 1 RETURNING epoch"


@dataclass(frozen=True, slots=True)
class Known:
    """What a process knows was committed: the highest seq (0: none), and the
    server start it learned it under (None: none seen yet)."""

    started: datetime | None
    seq: int


@dataclass(frozen=True, slots=True)
class Seen:
    started: datetime  # the server start this connection is on
    new_epoch: str | None  # the epoch this check started, if it did
    # the log's head when that start was first seen (None: not read, the
    # start was known): seqs known from before it past it were lost
    first_head: int | None = None


@dataclass(frozen=True, slots=True)
class _Decided:
    recorded: datetime | None  # the start recorded before
    first_head: int
    lost: bool  # the process knew a seq past the first head
    after_async: bool  # another start after asynchronous commits
    epoch: str | None  # the epoch started, if one was


async def check_server_start(conn: Conn, where: str, known: Known) -> Seen:
    """Record the server start ``conn`` is on; a new feed epoch if the server
    changed after asynchronous commits, or lost commits ``known`` says were
    made (``where`` names the store in the warning)."""
    recorded, was_async, started, is_async = (await conn.fetch(READ))[0]
    new_to_us = known.seq > 0 and known.started != started
    if recorded == started and (was_async or not is_async) and not new_to_us:
        return Seen(started, None)
    await conn.execute(BEGIN_DURABLY)
    try:
        decided = await _decide(conn, started, is_async, known)
        await conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(Exception):
            await conn.execute("ROLLBACK")
        raise
    if decided.epoch is not None:
        _warn(where, started, known, decided)
    return Seen(started, decided.epoch, decided.first_head)


async def _decide(conn: Conn, started: datetime, is_async: bool, known: Known) -> _Decided:
    """Under the row's lock, as committed by now: record ``started``, and
    start a new epoch if the check says so and none was for this start."""
    recorded, was_async, noted, first_head, renewed = (await conn.fetch(LOCK))[0]
    moved = recorded != started
    if moved or noted != started:  # not noted for this start (a v10 relay recorded it)
        # before any op takes a seq on this start, unless a v10 relay's did:
        # a seq known past the head as read now is lost all the same
        first_head, renewed = int((await conn.fetch(HEAD))[0][0]), False
    lost = known.started not in (None, started) and known.seq > first_head
    after_async = moved and recorded is not None and was_async
    epoch = None
    if (lost or after_async) and not renewed:
        epoch = new_epoch()
        if not await conn.fetch(NEW_EPOCH, (epoch,)):
            epoch = None  # no epoch handed out yet: the first is new anyway
        renewed = True
    still_async = is_async or (was_async and not moved)
    await conn.execute(RECORD, (started, still_async, first_head, renewed))
    return _Decided(recorded, first_head, lost, after_async, epoch)


def _warn(where: str, started: datetime, known: Known, decided: _Decided) -> None:
    if decided.lost and known.started is not None:
        log.warning(
            "%s: the log's head on the database server (started %s) is seq %d, "
            "but seq %d was committed (seen under the start %s): commits were lost "
            "(a failover to a standby that had not received them?), and their seqs "
            "will be given again: the changes feed starts epoch %s (followers "
            "bootstrap again)",
            where, started.isoformat(), decided.first_head, known.seq,
            known.started.isoformat(), decided.epoch,
        )  # fmt: skip
    elif decided.recorded is not None:
        log.warning(
            "%s: the database server restarted (%s, was %s) after commits made with "
            "synchronous_commit=off, which it may have lost: the changes feed starts "
            "epoch %s (followers bootstrap again)",
            where, started.isoformat(), decided.recorded.isoformat(), decided.epoch,
        )  # fmt: skip
