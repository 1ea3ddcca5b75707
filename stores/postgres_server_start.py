"""Whether the Postgres server restarted after the relay committed asynchronously.

With ``synchronous_commit=off`` (chosen in the store URL) a commit returns
before its WAL is flushed, so a crash of the database server or its host may
lose the last commits. Their seqs are then given again, to other ops, and a
feed follower holding a token past the surviving head would resume past ops
it never saw without a gap being named: the feed's epoch must change.

``server_start`` records the server start (``pg_postmaster_start_time()``)
the store last saw and whether any connection ran with asynchronous commits
under it. Every new connection checks before it is used (the store's open,
and each connection the pool opens later, as after the server restarted
under a running relay):
- the same start: nothing to do (one read, no write);
- another start after asynchronous commits: a new feed epoch, written with the
  new start in one transaction that waits for the WAL flush (the epoch is
  durable before any op takes a seq under it), and a warning;
- another start without: the new start is recorded, the epoch kept.
Concurrent checks (connections, processes) serialize on the row; the first
starts the epoch, the others find the start recorded.

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

A store upgraded from schema v9 holds no start (NULL): the first one seen is
recorded without a new epoch (a crash before that is the operator's to
handle, as it was: ``dfos-relay feed reset-epoch``).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from datetime import datetime

from stores.epoch import new_epoch
from stores.sql.conn import Conn

log = logging.getLogger("dfos_relay")

READ = (
    "SELECT started, async_commits, pg_postmaster_start_time(), "
    "current_setting('synchronous_commit') = 'off' FROM server_start WHERE id = 1"
)
# the session's own setting is read before: SET LOCAL changes what it shows
BEGIN_DURABLY = "BEGIN; SET LOCAL synchronous_commit = on"
LOCK = "SELECT started, async_commits FROM server_start WHERE id = 1 FOR UPDATE"
RECORD = "UPDATE server_start SET started = $1, async_commits = $2 WHERE id = 1"
NEW_EPOCH = "UPDATE feed_meta SET epoch = $1 WHERE id = 1 RETURNING epoch"


@dataclass(frozen=True, slots=True)
class Seen:
    started: datetime  # the server start this connection is on
    new_epoch: str | None  # the epoch this check started, if it did


async def check_server_start(conn: Conn, where: str) -> Seen:
    """Record the server start ``conn`` is on; a new feed epoch if the server
    restarted after asynchronous commits (``where`` names the store in the
    warning)."""
    recorded, was_async, started, is_async = (await conn.fetch(READ))[0]
    if recorded == started and (was_async or not is_async):
        return Seen(started, None)
    await conn.execute(BEGIN_DURABLY)
    try:
        recorded, was_async = (await conn.fetch(LOCK))[0]  # as committed by now
        epoch = None
        if recorded != started:
            if recorded is not None and was_async:
                epoch = new_epoch()
                if not await conn.fetch(NEW_EPOCH, (epoch,)):
                    epoch = None  # no epoch handed out yet: the first is new anyway
            await conn.execute(RECORD, (started, is_async))
        elif is_async and not was_async:
            await conn.execute(RECORD, (started, True))
        await conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(Exception):
            await conn.execute("ROLLBACK")
        raise
    if epoch is not None:
        log.warning(
            "%s: the database server restarted (%s, was %s) after commits made with "
            "synchronous_commit=off, which it may have lost: the changes feed starts "
            "epoch %s (followers bootstrap again)",
            where, started.isoformat(), recorded.isoformat(), epoch,
        )  # fmt: skip
    return Seen(started, epoch)
