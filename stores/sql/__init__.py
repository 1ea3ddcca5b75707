"""Shared SQL for the durable backends (SQLite and Postgres).

One schema, one set of queries and one commit plan, rendered per dialect;
``stores/sqlite.py`` and ``stores/postgres.py`` only add connections,
transactions and locking.
"""
