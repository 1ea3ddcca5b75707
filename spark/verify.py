"""``--verify``: re-verify every distinct operation, independently of relays.

Role: Spark wiring around ``verify_ops``. Each distinct token (by SHA-256)
is verified once, whichever relays served it: it reads the token table
(``spark.tokens``, one row per distinct entry with the relays holding it),
and the verdicts are joined back to the relays that served each token.

Two Python passes, each one shuffle and one ``mapPartitions`` over
partitions sorted by group (batches of rows, no per-group Python calls):

1. identity ops grouped per DID replay the identity chains and yield each
   DID's key history (every key it held, and its delete time);
2. content chains and signer DIDs: each group carries the key histories it
   needs (joined in Spark: a content chain's signers, a DID's own history)
   ahead of its ops; content chains replay from the genesis, beacons,
   artifacts and countersignatures verify one by one.

The relay-level countersignature rules (target held by the serving relay,
witness is not the target's author, one per witness and target) are column
joins over the holdings table. Output: one row per invalid log entry and
reason: ``cid, kind, chainId, tokenHash, reason, servedBy`` where kind and
chainId are the entry's claim and servedBy the (sorted) relays serving that
token under that CID and claim: relays holding a CID under another token, or
filing it under another chain, are not blamed for it.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark.tokens import held_by
from spark.verify_ops import chain_partition, identity_partition

__all__ = ["invalid_ops"]

RESULT = StructType(
    [
        StructField("tokenHash", StringType()),
        StructField("cid", StringType()),
        StructField("kind", StringType()),
        StructField("chainId", StringType()),
        StructField("error", StringType()),
    ]
)
KEY = StructType([StructField("id", StringType()), StructField("mk", StringType())])
HISTORY = StructType(
    [
        StructField("did", StringType()),
        StructField("keys", ArrayType(KEY)),
        StructField("deletedAt", LongType()),
        StructField("errors", ArrayType(RESULT)),
    ]
)
_OP_FIELDS = ("tokenHash", "cid", "jwsToken", "kind", "chainId")
_STANDALONE = ("beacon", "artifact", "countersign")


def _grouped(df: DataFrame, partitions: int, key: str, *order: str) -> DataFrame:
    """One shuffle: hash-partition by ``key``, sort each partition by group."""
    return df.repartition(partitions, key).sortWithinPartitions(key, *order)


def _histories(spark: SparkSession, table: DataFrame, partitions: int, now: int) -> DataFrame:
    """Pass 1: ``did, keys, deletedAt, errors`` per DID with identity ops."""
    ops = table.where(F.col("kind") == "identity-op").select(*_OP_FIELDS)
    rdd = _grouped(ops, partitions, "chainId").rdd.mapPartitions(
        lambda rows: identity_partition(rows, now)
    )
    return spark.createDataFrame(rdd, HISTORY, verifySchema=False)


def _chain_errors(
    spark: SparkSession, table: DataFrame, histories: DataFrame, partitions: int, now: int
) -> DataFrame:
    """Pass 2: ``tokenHash, cid, error`` of invalid content and standalone ops."""
    keys = histories.select("did", "keys", "deletedAt")
    content = table.where(F.col("kind") == "content-op")
    standalone = table.where(F.col("kind").isin(*_STANDALONE))
    signers = content.where(F.col("did").isNotNull()).select("chainId", "did").distinct()
    op_cols: list[Column | str] = [F.lit(1).alias("rowType"), *_OP_FIELDS, "did"]
    none = [F.lit(None).cast("string").alias(c) for c in _OP_FIELDS]
    rows = (
        content.select(F.concat(F.lit("c|"), "chainId").alias("gkey"), *op_cols)
        .unionByName(
            standalone.select(
                F.concat(F.lit("d|"), F.coalesce("did", F.lit(""))).alias("gkey"), *op_cols
            ),
        )
        .withColumn("keys", F.lit(None).cast(ArrayType(KEY)))
        .withColumn("deletedAt", F.lit(None).cast(LongType()))
        .unionByName(
            signers.join(keys, "did").select(
                F.concat(F.lit("c|"), "chainId").alias("gkey"),
                F.lit(0).alias("rowType"),
                *none,
                "did",
                "keys",
                "deletedAt",
            )
        )
        .unionByName(
            keys.select(
                F.concat(F.lit("d|"), "did").alias("gkey"),
                F.lit(0).alias("rowType"),
                *none,
                "did",
                "keys",
                "deletedAt",
            )
        )
    )
    grouped = _grouped(rows, partitions, "gkey", "rowType")
    rdd = grouped.rdd.mapPartitions(lambda batch: chain_partition(batch, now))
    return spark.createDataFrame(rdd, RESULT, verifySchema=False)


def _countersign_rules(table: DataFrame, held: DataFrame, relays: list[str]) -> DataFrame:
    """Relay-level checks, per serving relay: ``cid, kind, chainId,
    tokenHash, relay, reason``."""
    entry = ["cid", "kind", "chainId", "tokenHash"]
    cs = table.where(F.col("kind") == "countersign").select(
        F.explode(held_by(relays)).alias("relay"),
        *entry,
        "targetCid",
        F.col("did").alias("witness"),
    )
    targets = held.select(
        F.col("cid").alias("targetCid"),
        F.col("heldBy").alias("targetHeldBy"),
        F.col("author").alias("targetAuthor"),
    )
    joined = cs.join(targets, "targetCid", "left")
    missing = joined.where(
        F.col("targetHeldBy").isNull() | ~F.array_contains("targetHeldBy", F.col("relay"))
    ).select(
        *entry,
        "relay",
        F.concat(
            F.lit("countersign target "), "targetCid", F.lit(" is not held by the serving relay")
        ).alias("reason"),
    )
    self_signed = joined.where(F.col("witness") == F.col("targetAuthor")).select(
        *entry, "relay", F.lit("self-countersignature").alias("reason")
    )
    pairs = (
        cs.groupBy("relay", "targetCid", "witness")
        .agg(F.collect_set(F.struct(*entry)).alias("entries"))
        .where(F.size(F.array_distinct(F.transform("entries", lambda e: e["cid"]))) > 1)
    )
    duplicated = pairs.select(F.explode("entries").alias("e"), "relay").select(
        "e.*",
        "relay",
        F.lit("more than one countersignature per witness and target").alias("reason"),
    )
    return missing.unionByName(self_signed).unionByName(duplicated)


def invalid_ops(
    spark: SparkSession,
    table: DataFrame,
    held: DataFrame,
    relays: list[str],
    partitions: int,
    now: int,
) -> DataFrame:
    """Every invalid log entry: ``cid, kind, chainId, tokenHash, reason,
    servedBy``.

    ``table`` is the token table (``spark.tokens``) with tokens, ``did`` and
    ``author``; ``held`` the holdings table of ``compare.holdings``."""
    entry = ["cid", "kind", "chainId", "tokenHash"]
    histories = _histories(spark, table, partitions, now).cache()
    errors = (
        histories.select(F.explode("errors").alias("r"))
        .select("r.*")
        .unionByName(_chain_errors(spark, table, histories, partitions, now))
    )
    # The relays serving this very entry (token, CID and claim): another
    # relay's token for the CID, or its filing under another chain, has a
    # verdict of its own.
    served = table.select(*entry, held_by(relays).alias("servedBy"))
    crypto = errors.join(served, entry).select(*entry, F.col("error").alias("reason"), "servedBy")
    relay_level = (
        _countersign_rules(table, held, relays)
        .groupBy(*entry, "reason")
        .agg(F.array_sort(F.collect_set("relay")).alias("servedBy"))
    )
    return crypto.unionByName(relay_level).select(*entry[:3], "tokenHash", "reason", "servedBy")
