"""``--verify``: re-verify every distinct operation, independently of relays.

Role: Spark wiring around ``verify_ops``. Each distinct token (by SHA-256)
is verified once, whichever relays served it. Identity key histories are
replayed per DID first; content chains then replay with the histories of
their signers joined in, and beacons, artifacts and countersignatures verify
one by one against their signer's history. The relay-level countersignature
rules (target held by the serving relay, witness is not the target's author,
one per witness and target) are column joins.

Output: one row per invalid op and reason: ``cid, kind, chainId, reason,
servedBy`` (sorted relay names). Python runs only inside ``rdd`` maps.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark.verify_ops import (
    HistoryResolver,
    replay_content,
    replay_identity,
    verify_partition,
)

__all__ = ["invalid_ops"]

RESULT = StructType(
    [StructField("tokenHash", StringType()), StructField("cid", StringType()),
     StructField("error", StringType())]
)
KEY = StructType([StructField("id", StringType()), StructField("mk", StringType())])
HISTORY = StructType(
    [
        StructField("did", StringType()),
        StructField("keys", ArrayType(KEY)),
        StructField("deletedAt", LongType()),
        StructField("results", ArrayType(RESULT)),
    ]
)
_OP_FIELDS = ("cid", "jwsToken", "tokenHash", "kind", "chainId")


def _distinct_tokens(decoded: DataFrame) -> DataFrame:
    return decoded.groupBy("tokenHash").agg(
        F.first("cid").alias("cid"),
        F.first("jwsToken").alias("jwsToken"),
        F.first("kind").alias("kind"),
        F.first("chainId").alias("chainId"),
        F.first("did").alias("did"),
    )


def _identity_row(row: Any, now: int) -> tuple[Any, ...]:
    results, (keys, deleted_at) = replay_identity(row["chainId"], row["ops"], now)
    return (row["chainId"], keys, deleted_at, results)


def _content_rows(row: Any, now: int) -> list[tuple[str, str, str | None]]:
    histories = {s["did"]: (s["keys"] or [], s["deletedAt"]) for s in row["signers"] or []}
    return replay_content(row["chainId"], row["ops"], HistoryResolver(histories), now)


def _crypto_results(spark: SparkSession, ops: DataFrame, now: int) -> DataFrame:
    identity = (
        ops.where(F.col("kind") == "identity-op")
        .groupBy("chainId")
        .agg(F.collect_list(F.struct(*_OP_FIELDS)).alias("ops"))
        .rdd.map(lambda row: _identity_row(row, now))
    )
    histories = spark.createDataFrame(identity, HISTORY).cache()
    keys = histories.select("did", "keys", "deletedAt")
    signers = (
        ops.where((F.col("kind") == "content-op") & F.col("did").isNotNull())
        .select("chainId", "did")
        .distinct()
        .join(keys, "did")
        .groupBy("chainId")
        .agg(F.collect_list(F.struct("did", "keys", "deletedAt")).alias("signers"))
    )
    content = (
        ops.where(F.col("kind") == "content-op")
        .groupBy("chainId")
        .agg(F.collect_list(F.struct(*_OP_FIELDS)).alias("ops"))
        .join(signers, "chainId", "left")
        .rdd.flatMap(lambda row: _content_rows(row, now))
    )
    standalone = (
        ops.where(F.col("kind").isin("beacon", "artifact", "countersign"))
        .join(keys.withColumn("hasChain", F.lit(True)), "did", "left")
        .rdd.mapPartitions(lambda rows: verify_partition(rows, now))
    )
    return (
        histories.select(F.explode("results").alias("r"))
        .select("r.*")
        .unionByName(spark.createDataFrame(content, RESULT))
        .unionByName(spark.createDataFrame(standalone, RESULT))
    )


def _countersign_rules(decoded: DataFrame) -> DataFrame:
    """Relay-level checks, per serving relay: ``cid, relay, reason``."""
    cs = decoded.where(F.col("kind") == "countersign").select(
        "relay", "cid", "targetCid", F.col("did").alias("witness")
    )
    held = decoded.select("relay", F.col("cid").alias("targetCid")).distinct()
    missing = cs.join(held, ["relay", "targetCid"], "left_anti").select(
        "cid", "relay", F.concat(F.lit("countersign target "), "targetCid",
                                 F.lit(" is not held by the serving relay")).alias("reason")
    )
    authors = decoded.select(
        F.col("cid").alias("targetCid"), F.col("author").alias("targetAuthor")
    ).distinct()
    own = cs.join(authors, "targetCid").where(F.col("witness") == F.col("targetAuthor"))
    self_signed = own.select("cid", "relay", F.lit("self-countersignature").alias("reason"))
    pairs = cs.groupBy("relay", "targetCid", "witness").agg(
        F.collect_set("cid").alias("cids")
    ).where(F.size("cids") > 1)
    duplicated = pairs.select(
        F.explode("cids").alias("cid"),
        "relay",
        F.lit("more than one countersignature per witness and target").alias("reason"),
    )
    return missing.unionByName(self_signed).unionByName(duplicated)


def invalid_ops(spark: SparkSession, decoded: DataFrame, now: int) -> DataFrame:
    """Every invalid op: ``cid, kind, chainId, reason, servedBy``."""
    ops = _distinct_tokens(decoded)
    served = decoded.groupBy("tokenHash").agg(F.collect_set("relay").alias("servedBy"))
    crypto = (
        _crypto_results(spark, ops, now)
        .where(F.col("error").isNotNull())
        .join(served, "tokenHash")
        .join(ops.select("tokenHash", "kind", "chainId"), "tokenHash")
        .select("cid", "kind", "chainId", F.col("error").alias("reason"), "servedBy")
    )
    meta = decoded.select("cid", "kind", "chainId").dropDuplicates(["cid"])
    relay_level = (
        _countersign_rules(decoded)
        .groupBy("cid", "reason")
        .agg(F.collect_set("relay").alias("servedBy"))
        .join(meta, "cid")
        .select("cid", "kind", "chainId", "reason", "servedBy")
    )
    return crypto.unionByName(relay_level).withColumn("servedBy", F.array_sort("servedBy"))
