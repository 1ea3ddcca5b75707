"""The convergence report: JSON document, stdout summary, Parquet tables.

Role: collect the difference tables (``compare``, ``verify``) into one
JSON-able dict, with one Spark action (totals, relay stats and the listed
rows of every table travel as JSON text in one union). Lists are capped at
``max_listed`` items each, a divergent chain's ``lacking`` CIDs per relay
too (the totals are always exact, ``lackingTotal`` for those; ``--parquet``
writes the complete tables). ``converged`` is true when every relay holds
the same ops with the same tokens (filed under the same kind and chain)
and the same head for every chain;
``verified`` (with ``--verify``) when no op is invalid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

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


def _as_json(section: str, df: DataFrame) -> DataFrame:
    """``section, row``: each row of ``df`` as JSON text (nulls kept)."""
    row = F.to_json(F.struct(*df.columns), {"ignoreNullFields": "false"})
    return df.select(F.lit(section).alias("section"), row.alias("row"))


def _relays(stats: list[dict[str, Any]], relays: list[str]) -> list[dict[str, Any]]:
    per: dict[str, dict[str, Any]] = {
        r: {"name": r, "ops": 0, "opsByKind": {}, "chainsByKind": {}} for r in relays
    }
    for row in stats:
        entry = per[row["relay"]]
        entry["ops"] += row["ops"]
        entry["opsByKind"][row["kind"]] = row["ops"]
        if row["kind"] in ("identity-op", "content-op"):
            entry["chainsByKind"][row["kind"]] = row["chains"]
    return [per[r] for r in sorted(relays)]


def _collect(
    tables: Tables, listed: dict[str, tuple[DataFrame, list[str]]], limit: int
) -> tuple[dict[str, int], dict[str, list[dict[str, Any]]]]:
    """One Spark job for the whole report: every total, the relay stats and
    the first ``limit`` rows of every listed table (sorted by its key)."""
    totals = [
        df.agg(F.count(F.lit(1)).alias("n")).select(F.lit(name).alias("name"), "n")
        for name, (df, _) in listed.items()
    ]
    all_chains = tables.chains.agg(F.count(F.lit(1)).alias("n")).select(
        F.lit("chains").alias("name"), "n"
    )
    parts = [
        _as_json("totals", reduce(DataFrame.unionByName, [all_chains, *totals])),
        _as_json("stats", tables.stats),
        *[_as_json(name, df.orderBy(*order).limit(limit)) for name, (df, order) in listed.items()],
    ]
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in ("totals", "stats", *listed)}
    for row in reduce(DataFrame.unionByName, parts).collect():
        rows[row["section"]].append(json.loads(row["row"]))
    counts = {r["name"]: r["n"] for r in rows.pop("totals")}
    for name, (_, order) in listed.items():
        rows[name] = [_plain(r) for r in sorted(rows[name], key=lambda r: _order_key(r, order))]
    return counts, rows


def _order_key(row: dict[str, Any], order: list[str]) -> list[tuple[bool, str]]:
    # Spark's order: nulls first, strings by UTF-8 bytes (= code points).
    return [(row[k] is not None, row[k] or "") for k in order]


def _capped_lacking(chains: DataFrame, limit: int) -> DataFrame:
    """Divergent chains with each relay's ``lacking`` list capped at
    ``limit`` CIDs (the first by code point) and ``lackingTotal``: the full
    count per relay."""
    lacking = F.col("lacking")
    return chains.where("size(reasons) > 0").select(
        "chainId",
        "kind",
        "heads",
        F.transform_values(lacking, lambda _, cids: F.slice(cids, 1, limit)).alias("lacking"),
        F.transform_values(lacking, lambda _, cids: F.size(cids)).alias("lackingTotal"),
        "reasons",
    )


def build_report(tables: Tables, relays: list[str], max_listed: int) -> dict[str, Any]:
    cs_partial = tables.partial.where(
        f"kind = 'countersign' AND (targetHeldBy IS NULL OR size(targetHeldBy) < {len(relays)})"
    )
    listed = {
        "divergent": (_capped_lacking(tables.chains, max_listed), ["chainId", "kind"]),
        "partial": (tables.partial, ["chainId", "cid"]),
        "cs": (cs_partial, ["cid"]),
        "conflicts": (tables.conflicts, ["cid"]),
    }
    if tables.invalid is not None:
        # The whole row key: one CID may be invalid under several tokens or
        # claims for the same reason, and which of them fit the cap must not
        # depend on partitioning.
        listed["invalid"] = (tables.invalid, ["cid", "kind", "chainId", "tokenHash", "reason"])
    n, rows = _collect(tables, listed, max_listed)
    report: dict[str, Any] = {
        "relays": _relays(rows["stats"], relays),
        "chains": {
            "total": n["chains"],
            "agreed": n["chains"] - n["divergent"],
            "divergent": n["divergent"],
        },
        "divergentChains": rows["divergent"],
        "partialOps": {"total": n["partial"], "ops": rows["partial"]},
        "countersignsWithPartialTarget": {"total": n["cs"], "ops": rows["cs"]},
        "tokenConflicts": {"total": n["conflicts"], "cids": rows["conflicts"]},
        "maxListed": max_listed,
    }
    report["converged"] = n["divergent"] == 0 and n["partial"] == 0 and n["conflicts"] == 0
    if tables.invalid is not None:
        report["invalidOps"] = {"total": n["invalid"], "ops": rows["invalid"]}
        report["verified"] = n["invalid"] == 0
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
        total = report["tokenConflicts"]["total"]
        lines.append(f"CIDs served with different tokens or claims: {total}")
    if "invalidOps" in report:
        lines.append(f"invalid ops: {report['invalidOps']['total']}")
        for op in report["invalidOps"]["ops"][:10]:
            lines.append(
                f"  invalid {op['cid']} ({op['kind']}): {op['reason']} "
                f"served by {', '.join(op['servedBy'])}"
            )
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
