"""Convergence check over relay log dumps, as PySpark jobs (issue 6).

Modules: ``dumps`` (read and validate JSON Lines dumps), ``replay`` (decode
JWS in Spark columns, per-relay DAG tips and heads), ``verify`` (independent
re-verification reusing ``relay.protocol``), ``report`` (difference tables,
JSON report, summary) and ``convergence`` (the entry point, also runnable by
``spark-submit``).
"""

from __future__ import annotations

__all__ = ["run_convergence"]


def run_convergence(argv: list[str]) -> int:
    from spark.convergence import run_convergence as run

    return run(argv)
