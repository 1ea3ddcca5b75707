"""Convergence check over relay log dumps, as PySpark jobs (issue 6).

Modules: ``dumps`` (read and validate JSON Lines dumps), ``lines`` (the
line-length bound and the audit of what the JSON reader cannot see of a
line: JSON arrays, over-long lines), ``replay`` (decode
JWS payloads in Spark columns, per-relay DAG tips and heads), ``tokens`` (the
one shuffle: each distinct entry once, with a bitmask of the relays holding
it), ``compare`` (difference tables), ``verify`` and ``verify_ops``
(independent re-verification reusing ``relay.protocol``), ``report`` (JSON
report, summary, Parquet) and ``convergence`` (the entry point, also
runnable by ``spark-submit``).
"""

from __future__ import annotations

__all__ = ["run_convergence"]


def run_convergence(argv: list[str]) -> int:
    from spark.convergence import run_convergence as run

    return run(argv)
