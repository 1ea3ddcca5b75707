"""The Postgres store's push of commits (``FeedStore.watch_commits``): one
connection of its own (outside the pool) that LISTENs on the log's NOTIFY
channel, and is kept.

A LISTEN lives and dies with its connection, and a dead one is silent: no
NOTIFY comes any more, and other processes' commits reach this one only
through the feed's slower head-seq poll. So the connection is watched: its
loss is heard at once when the socket closes (a server restart,
``pg_terminate_backend``), and found by a ``SELECT 1`` every
``CHECK_INTERVAL_S`` when it does not (a network blip).

``start()`` LISTENs and calls ``on_listening(True)``. When that first
LISTEN fails (the server down or refusing connections at that moment), one
warning, and it is retried as a lost one is, below: the feed polls at its
base interval until then, as it does before any ``on_listening(True)``.

On a loss: ``on_listening(False)`` (the feed polls at its base interval),
one warning, then reconnects with a doubling backoff, from
``BACKOFF_FIRST_S`` up to ``BACKOFF_MAX_S`` (never a tight loop against a
down server, nor against one that drops each new connection: the backoff
starts over only after a connection that lasted). Each wait is jittered,
drawn from the upper half of its bound, so that the workers of every relay
on a server that restarts do not all reconnect at the same instants. Once
it LISTENs again: ``on_head`` with the head as of then, read on the new
connection after the LISTEN (so a commit made during the gap is told by the
one or the other; and not through the pool, whose connections a network
blip may have left hanging), then ``on_listening(True)`` and one info.
Retries log at debug only. ``stop()`` cancels the loop wherever it is (a
backoff, a connect, a read) and closes the connection.

Not checked: whether the server restarted (``stores.postgres_server_start``):
that head only wakes subscribers, whose reads go through the pool, and a new
pool connection checks before it is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from relay.protocol.untrusted import ascii_decimal
from stores.postgres_errors import CONNECTION_ERRORS

log = logging.getLogger("dfos_relay.store")

APPLICATION_NAME = "dfos-relay-listen"  # in pg_stat_activity, unless the URL names one
CHECK_INTERVAL_S = 5.0  # a connection that died without closing its socket is found this often
CHECK_TIMEOUT_S = 2.0
BACKOFF_FIRST_S = 0.1  # the first reconnect waits up to this long, the next ones twice the last...
BACKOFF_MAX_S = 5.0  # ...up to this
READ_TIMEOUT_S = 5.0  # the head read after a reconnect
STOP_TIMEOUT_S = 2.0


def backoff_s(failures: int, draw: float) -> float:
    """How long to wait before the reconnect that follows ``failures``
    failed ones (0: the first after a loss), for ``draw`` in [0, 1)
    (``random.random()``): in [bound / 2, bound), where the bound doubles
    from ``BACKOFF_FIRST_S`` up to ``BACKOFF_MAX_S``. Half of it is jitter,
    which spreads reconnects; the other half keeps them from a tight loop."""
    bound = min(BACKOFF_FIRST_S * 2 ** min(failures, 16), BACKOFF_MAX_S)
    return bound * (1.0 + draw) / 2


class CommitListener:
    """One kept LISTEN on ``channel``: heads heard go to ``on_head``."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        channel: str,
        head_sql: str,
        on_head: Callable[[int], None],
        on_listening: Callable[[bool], None],
        where: str,
    ) -> None:
        self._connect = connect
        self._channel = channel
        self._head_sql = head_sql  # one row, one column: the log's head seq
        self._on_head = on_head
        self._on_listening = on_listening
        self._where = where
        self._conn: Any = None
        self._task: asyncio.Task[None] | None = None
        self._failures = 0  # reconnects since one that lasted: the next backoff

    async def start(self) -> None:
        """LISTEN, and keep it; when it cannot LISTEN yet, keep trying."""
        try:
            self._conn = await self._listen()
        except CONNECTION_ERRORS as exc:
            log.warning(
                "cannot LISTEN on Postgres at %s (%s); polling the head seq until it can",
                self._where,
                exc,
            )
        else:
            self._on_listening(True)
        self._task = asyncio.get_running_loop().create_task(self._keep())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=STOP_TIMEOUT_S)  # terminates it past that

    async def _listen(self) -> Any:
        conn = await self._connect()
        try:
            await conn.add_listener(self._channel, self._heard)
        except BaseException:
            conn.terminate()
            raise
        return conn

    def _heard(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        if (head := ascii_decimal(payload)) is not None:
            self._on_head(head)

    async def _keep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._conn is None:  # the first LISTEN failed, or the last one was lost
                self._conn = await self._reconnect()
                self._on_listening(True)
                log.info("LISTENing on Postgres at %s", self._where)
            since = loop.time()
            await self._until_lost(self._conn)
            self._conn.terminate()
            self._conn = None
            self._on_listening(False)
            log.warning(
                "lost the LISTEN connection to Postgres at %s; polling the head "
                "seq until it is back",
                self._where,
            )
            if loop.time() - since >= BACKOFF_MAX_S:
                self._failures = 0  # it lasted: a new loss, not a server that drops each one

    async def _until_lost(self, conn: Any) -> None:
        lost = asyncio.Event()
        conn.add_termination_listener(lambda _conn: lost.set())
        while not conn.is_closed():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(CHECK_INTERVAL_S):
                    await lost.wait()
                return  # the socket closed
            try:
                await conn.execute("SELECT 1", timeout=CHECK_TIMEOUT_S)
            except Exception as exc:  # whatever it is, the push cannot be trusted
                log.debug("the LISTEN connection's check failed: %s", exc)
                return

    async def _reconnect(self) -> Any:
        """A connection that LISTENs again, once the head as of then is told."""
        while True:
            await asyncio.sleep(backoff_s(self._failures, random.random()))
            self._failures += 1
            try:
                conn = await self._listen()
            except Exception as exc:  # the loop must outlive any failure
                log.debug("LISTEN reconnect to %s failed: %s", self._where, exc)
                continue
            try:
                # after the LISTEN: no commit falls between the two
                head = int(await conn.fetchval(self._head_sql, timeout=READ_TIMEOUT_S))
            except Exception as exc:
                log.debug("head read after a LISTEN reconnect failed: %s", exc)
                conn.terminate()
                continue
            except BaseException:  # stopped
                conn.terminate()
                raise
            self._on_head(head)
            return conn
