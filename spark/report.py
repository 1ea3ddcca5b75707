"""The convergence report: JSON document, stdout summary, Parquet tables.

Role: collect the difference tables (``compare``, ``verify``) into one
JSON-able dict. Lists are capped at ``max_listed`` items each (the totals are
always exact; ``--parquet`` writes the complete tables). ``converged`` is
true when every relay holds the same ops with the same tokens and the same
head for every chain; ``verified`` (with ``--verify``) when no op is invalid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Row

__all__ = ["Tables", "build_report", "summary", "write_parquet"]


@dataclass(frozen=True, slots=True)
class Tables:
    stats: DataFrame
    chains: DataFrame
    partial: DataFrame
    conflicts: DataFrame
    invalid: DataFrame | None


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _listed(df: DataFrame, order: list[str], limit: int) -> tuple[int, list[dict[str, Any]]]:
    rows = df.orderBy(*order).limit(limit + 1).collect()
    total = len(rows) if len(rows) <= limit else df.count()
    return total, [_plain(r) for r in rows[:limit]]


def _relays(stats: DataFrame, relays: list[str]) -> list[dict[str, Any]]:
    per: dict[str, dict[str, Any]] = {
        r: {"name": r, "ops": 0, "opsByKind": {}, "chainsByKind": {}} for r in relays
    }
    for row in stats.collect():
        entry = per[row["relay"]]
        entry["ops"] += row["ops"]
        entry["opsByKind"][row["kind"]] = row["ops"]
        if row["kind"] in ("identity-op", "content-op"):
            entry["chainsByKind"][row["kind"]] = row["chains"]
    return [per[r] for r in sorted(relays)]


def build_report(tables: Tables, relays: list[str], max_listed: int) -> dict[str, Any]:
    divergent = tables.chains.where("size(reasons) > 0")
    total_chains = tables.chains.count()
    n_divergent, divergent_rows = _listed(divergent, ["chainId"], max_listed)
    n_partial, partial_rows = _listed(tables.partial, ["chainId", "cid"], max_listed)
    cs_partial = tables.partial.where(
        "kind = 'countersign' AND (targetHeldBy IS NULL OR size(targetHeldBy) < "
        f"{len(relays)})"
    )
    n_cs, cs_rows = _listed(cs_partial, ["cid"], max_listed)
    n_conflicts, conflict_rows = _listed(tables.conflicts, ["cid"], max_listed)
    report: dict[str, Any] = {
        "relays": _relays(tables.stats, relays),
        "chains": {
            "total": total_chains,
            "agreed": total_chains - n_divergent,
            "divergent": n_divergent,
        },
        "divergentChains": divergent_rows,
        "partialOps": {"total": n_partial, "ops": partial_rows},
        "countersignsWithPartialTarget": {"total": n_cs, "ops": cs_rows},
        "tokenConflicts": {"total": n_conflicts, "cids": conflict_rows},
        "maxListed": max_listed,
    }
    report["converged"] = n_divergent == 0 and n_partial == 0 and n_conflicts == 0
    if tables.invalid is not None:
        n_invalid, invalid_rows = _listed(tables.invalid, ["cid", "reason"], max_listed)
        report["invalidOps"] = {"total": n_invalid, "ops": invalid_rows}
        report["verified"] = n_invalid == 0
    return report


def summary(report: dict[str, Any]) -> str:
    chains = report["chains"]
    lines = [f"relays: {len(report['relays'])}"]
    for relay in report["relays"]:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(relay["opsByKind"].items()))
        lines.append(f"  {relay['name']}: {relay['ops']} ops ({kinds})")
    lines.append(
        f"chains: {chains['total']}, all relays agree on {chains['agreed']},"
        f" divergent {chains['divergent']}"
    )
    for chain in report["divergentChains"][:10]:
        lines.append(f"  divergent {chain['chainId']}: {', '.join(chain['reasons'])}")
    lines.append(f"ops held by only some relays: {report['partialOps']['total']}")
    if report["tokenConflicts"]["total"]:
        lines.append(f"CIDs served with different tokens: {report['tokenConflicts']['total']}")
    if "invalidOps" in report:
        lines.append(f"invalid ops: {report['invalidOps']['total']}")
        for op in report["invalidOps"]["ops"][:10]:
            lines.append(f"  invalid {op['cid']} ({op['kind']}): {op['reason']} "
                         f"served by {', '.join(op['servedBy'])}")
    verdict = "CONVERGED" if report["converged"] else "DIVERGED"
    if report.get("verified") is False:
        verdict += ", INVALID OPS"
    lines.append(verdict)
    return "\n".join(lines)


def write_json(report: dict[str, Any], path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=2, sort_keys=True)
        fh.write("\n")


def write_parquet(tables: Tables, out_dir: str) -> None:
    """The full difference tables, one Parquet directory each."""
    tables.chains.where("size(reasons) > 0").write.mode("overwrite").parquet(
        f"{out_dir}/divergent_chains"
    )
    tables.partial.write.mode("overwrite").parquet(f"{out_dir}/partial_ops")
    tables.conflicts.write.mode("overwrite").parquet(f"{out_dir}/token_conflicts")
    if tables.invalid is not None:
        tables.invalid.write.mode("overwrite").parquet(f"{out_dir}/invalid_ops")
