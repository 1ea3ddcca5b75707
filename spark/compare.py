"""Difference tables between relays (WEB-RELAY.md "Convergence").

Role: from the token table of all relays (``spark.tokens``: one row per
distinct entry with the relays holding it), derive in Spark columns
- ``relay_stats``: per relay, entries, ops by kind and chains by kind;
- ``partial_ops``: ops held by only some relays (``heldBy``, ``lackedBy``),
  countersignatures annotated with who holds their target;
- ``token_conflicts``: CIDs served with different tokens, or filed under
  different kinds or chains, by different relays;
- ``chain_table``: per chain, each relay's head, the ops each relay lacks and
  why the chain diverges (``chain-missing``, ``heads-differ``, ``ops-differ``);
  an empty ``reasons`` array means all relays agree on the chain.
Relays agree on a chain when every relay holds it with the same head and the
same ops. Nothing here verifies signatures (``verify``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark.replay import CHAIN_KINDS
from spark.tokens import held_by

__all__ = ["chain_table", "holdings", "partial_ops", "relay_stats", "token_conflicts"]


def _relays(relays: list[str]) -> Column:
    return F.array(*[F.lit(r) for r in sorted(relays)])


def relay_stats(table: DataFrame, heads: DataFrame, relays: list[str]) -> DataFrame:
    """``relay, kind, ops, chains`` (chains only for chain kinds); ``ops``
    counts distinct CIDs. ``table`` is the token table (``spark.tokens``),
    partitioned by cid, so the per-relay distinct CIDs need no shuffle."""
    held = table.select("cid", "kind", F.explode(held_by(relays)).alias("relay"))
    ops = (
        held.dropDuplicates(["cid", "kind", "relay"])
        .groupBy("relay", "kind")
        .agg(F.count("*").alias("ops"))
    )
    chains = heads.groupBy("relay", "kind").agg(F.count("*").alias("chains"))
    return ops.join(chains, ["relay", "kind"], "left").fillna(0, ["chains"])


def holdings(table: DataFrame, relays: list[str]) -> DataFrame:
    """One row per CID (shared by ``partial_ops``, ``token_conflicts`` and
    ``--verify``): ``cid, kind, chainId, targetCid, [author,] heldBy,
    variants, claims`` with variants = [{tokenHash, servedBy}] sorted by
    tokenHash and claims = [{kind, chainId, servedBy}] (the log entries'
    own kind and chain) sorted by kind and chainId (``author`` when
    ``table`` has it). ``table`` is the token table, already partitioned by
    cid: no shuffle."""
    served = F.col("served")
    hashes = F.array_sort(F.array_distinct(F.transform(served, lambda s: s["tokenHash"])))

    def relays_of(entries: Column) -> Column:
        return F.array_sort(F.array_distinct(F.flatten(F.transform(entries, lambda s: s["by"]))))

    variants = F.transform(
        hashes,
        lambda h: F.struct(
            h.alias("tokenHash"),
            relays_of(F.filter(served, lambda s: s["tokenHash"] == h)).alias("servedBy"),
        ),
    )
    pairs = F.transform(served, lambda s: F.struct(s["kind"].alias("k"), s["chainId"].alias("c")))
    claims = F.transform(
        F.array_sort(F.array_distinct(pairs)),
        lambda p: F.struct(
            p["k"].alias("kind"),
            p["c"].alias("chainId"),
            relays_of(
                F.filter(served, lambda s: (s["kind"] == p["k"]) & (s["chainId"] == p["c"]))
            ).alias("servedBy"),
        ),
    )
    extra = [c for c in ("author",) if c in table.columns]
    entry = F.struct("tokenHash", "kind", "chainId", held_by(relays).alias("by"))
    # min, not first: a CID filed under several claims reads the same every run
    held = table.groupBy("cid").agg(
        F.min("kind").alias("kind"),
        F.min("chainId").alias("chainId"),
        F.min("targetCid").alias("targetCid"),
        *[F.min(c).alias(c) for c in extra],
        F.collect_list(entry).alias("served"),
    )
    return held.select(
        "cid",
        "kind",
        "chainId",
        "targetCid",
        *extra,
        relays_of(served).alias("heldBy"),
        variants.alias("variants"),
        claims.alias("claims"),
    )


def partial_ops(held: DataFrame, relays: list[str]) -> DataFrame:
    """``cid, kind, chainId, heldBy, lackedBy, targetCid, targetHeldBy``."""
    partial = held.where(F.size("heldBy") < len(relays)).withColumn(
        "lackedBy", F.array_except(_relays(relays), F.col("heldBy"))
    )
    targets = held.select(F.col("cid").alias("targetCid"), F.col("heldBy").alias("targetHeldBy"))
    return partial.join(targets, "targetCid", "left").select(
        "cid", "kind", "chainId", "heldBy", "lackedBy", "targetCid", "targetHeldBy"
    )


def token_conflicts(held: DataFrame) -> DataFrame:
    """``cid, variants, claims``: CIDs served with more than one token, or
    filed under more than one (kind, chainId) claim (see ``holdings``)."""
    conflicting = (F.size("variants") > 1) | (F.size("claims") > 1)
    return held.where(conflicting).select("cid", "variants", "claims")


def chain_table(heads: DataFrame, partial: DataFrame, relays: list[str]) -> DataFrame:
    """Per chain: ``chainId, kind, heads, lacking, reasons``.

    A chain is a ``(chainId, kind)`` pair: a relay that files an op under
    another kind than its peers has a chain of that kind of its own (and a
    chain id with heads of two kinds would repeat the relay's map key)."""
    per_chain = heads.groupBy("chainId", "kind").agg(
        F.map_from_entries(F.collect_list(F.struct("relay", "head"))).alias("heads"),
        F.count("*").alias("relays"),
        F.countDistinct("head").alias("distinctHeads"),
    )
    lacking = (
        partial.where(F.col("kind").isin(*CHAIN_KINDS))
        .select("chainId", "kind", "cid", F.explode("lackedBy").alias("relay"))
        .groupBy("chainId", "kind", "relay")
        .agg(F.array_sort(F.collect_list("cid")).alias("cids"))
        .groupBy("chainId", "kind")
        .agg(F.map_from_entries(F.collect_list(F.struct("relay", "cids"))).alias("lacking"))
    )
    reasons = F.array_compact(
        F.array(
            F.when(F.col("relays") < len(relays), F.lit("chain-missing")),
            F.when(F.col("distinctHeads") > 1, F.lit("heads-differ")),
            F.when(F.col("lacking").isNotNull(), F.lit("ops-differ")),
        )
    )
    return per_chain.join(lacking, ["chainId", "kind"], "left").select(
        "chainId", "kind", "heads", "lacking", reasons.alias("reasons")
    )
