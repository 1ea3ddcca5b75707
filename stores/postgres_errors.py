"""What talking to Postgres over a connection of its own may raise, short
of a bug: the server unreachable or slow, an error it answered, a closed
connection, or one whose server session was ended (InternalClientError)."""

from __future__ import annotations

import asyncpg

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)
