"""Replay relay logs in Spark columns: decode, DAG tips, deterministic heads.

Role: the hot path of the convergence job, Spark column functions only.
Every compact JWS is split on ``.``; header and payload are base64url
decoded (``-_`` translated to ``+/``, ``=`` padded, ``unbase64``) and parsed
with ``from_json``. ``createdAt`` becomes epoch milliseconds in UTC.

Heads follow PROTOCOL.md "Chain Validity" and ``relay.rules.heads``: per
relay and chain (identity-op and content-op entries only), the tips are the
ops with no child among that relay's ops of the chain, and the head is the tip
with the highest ``(createdAt, CID)`` (CIDs compare by code point, as Spark
compares strings by UTF-8 bytes).

Not checked here: signatures, CIDs and chain rules (``verify``); an entry
whose token does not decode keeps null decoded columns.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

__all__ = ["CHAIN_KINDS", "chain_heads", "decode_entries"]

CHAIN_KINDS = ("identity-op", "content-op")

HEADER_SCHEMA = StructType(
    [StructField(name, StringType()) for name in ("alg", "typ", "kid", "cid")]
)
PAYLOAD_SCHEMA = StructType(
    [
        StructField(name, StringType())
        for name in ("type", "did", "previousOperationCID", "targetCID", "createdAt")
    ]
)


def created_at_ms(text: str) -> Column:
    """ISO 8601 ``createdAt`` (UTC ``Z`` or an offset) to epoch milliseconds."""
    return F.expr(f"unix_millis(to_timestamp({text}))")


def decode_entries(entries: DataFrame) -> DataFrame:
    """Add decoded columns: typ, kid, headerCid, opType, did, previousCid,
    targetCid, createdMs, author (the DID that signed the op)."""
    parts = F.split("jwsToken", r"\.")
    segments = entries.withColumn("_h64", parts.getItem(0)).withColumn("_p64", parts.getItem(1))
    header = F.from_json(_unbase64url("_h64").cast("string"), HEADER_SCHEMA)
    payload = F.from_json(_unbase64url("_p64").cast("string"), PAYLOAD_SCHEMA)
    decoded = segments.withColumn("h", header).withColumn("p", payload)
    author = F.when(F.col("kind") == "identity-op", F.col("chainId")).otherwise(F.col("p.did"))
    return decoded.select(
        *entries.columns,
        F.col("h.typ").alias("typ"),
        F.col("h.kid").alias("kid"),
        F.col("h.cid").alias("headerCid"),
        F.col("p.type").alias("opType"),
        F.col("p.did").alias("did"),
        F.col("p.previousOperationCID").alias("previousCid"),
        F.col("p.targetCID").alias("targetCid"),
        created_at_ms("p.createdAt").alias("createdMs"),
        author.alias("author"),
    )


def _unbase64url(segment: str) -> Column:
    """base64url (unpadded) to bytes: translate the alphabet, pad, unbase64."""
    return F.expr(
        f"unbase64(concat(translate({segment}, '-_', '+/'),"
        f" repeat('=', (4 - length({segment}) % 4) % 4)))"
    )


def chain_heads(decoded: DataFrame) -> DataFrame:
    """Per relay and chain: ``relay, chainId, kind, head, headMs, ops, tips``."""
    ops = decoded.where(F.col("kind").isin(*CHAIN_KINDS)).select(
        "relay", "chainId", "kind", "cid", "previousCid", "createdMs"
    )
    parents = ops.where(F.col("previousCid").isNotNull()).select(
        "relay", "chainId", F.col("previousCid").alias("cid")
    )
    tips = ops.join(parents.distinct(), ["relay", "chainId", "cid"], "left_anti")
    by_chain = tips.groupBy("relay", "chainId", "kind").agg(
        F.max(F.struct("createdMs", "cid")).alias("best"), F.count("*").alias("tips")
    )
    sizes = ops.groupBy("relay", "chainId").agg(F.count("*").alias("ops"))
    return by_chain.join(sizes, ["relay", "chainId"]).select(
        "relay",
        "chainId",
        "kind",
        F.col("best.cid").alias("head"),
        F.col("best.createdMs").alias("headMs"),
        "ops",
        "tips",
    )
