"""Replay relay logs in Spark columns: decode, DAG tips, deterministic heads.

Role: the hot path of the convergence job, Spark column functions only.
Only the payload segment of each compact JWS is decoded here (the header's
``typ``, ``kid`` and ``cid`` matter only to ``--verify``, which decodes the
whole token with ``relay.protocol``): it is cut out with ``split``,
base64url decoded (``-_`` mapped to ``+/``, ``try_to_binary``) and parsed once
with ``from_json`` into a struct whose fields are selected.
``createdAt`` becomes epoch milliseconds in UTC.

Heads follow PROTOCOL.md "Chain Validity" and ``relay.rules.heads``: per
relay and chain (identity-op and content-op entries only), the tips are the
ops with no child among that relay's ops of the chain, and the head is the tip
with the highest ``(createdAt, CID)`` (CIDs compare by code point, as Spark
compares strings by UTF-8 bytes). Heads are computed over the token table
(``spark.tokens``) with relay bitmasks, so every relay's DAG is replayed
at once: an op is a tip for the relays holding it but none of its children.

Not checked here: signatures, CIDs and chain rules (``verify``); an entry
whose token does not decode keeps null decoded columns.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from spark.tokens import held_by, word_names

__all__ = ["CHAIN_KINDS", "chain_heads", "decode_entries"]

CHAIN_KINDS = ("identity-op", "content-op")

PAYLOAD_SCHEMA = StructType(
    [
        StructField(name, StringType())
        for name in ("did", "previousOperationCID", "targetCID", "createdAt")
    ]
)


def created_at_ms(text: str) -> Column:
    """ISO 8601 ``createdAt`` (UTC ``Z`` or an offset) to epoch milliseconds."""
    return F.expr(f"unix_millis(to_timestamp({text}))")


def decode_entries(entries: DataFrame) -> DataFrame:
    """Add decoded payload columns: did, previousCid, targetCid, createdMs and
    author (the DID that signed the op: the chain's DID for identity ops)."""
    segment = F.split("jwsToken", r"\.", 3).getItem(1)
    payload = F.from_json(_unbase64url(segment).cast("string"), PAYLOAD_SCHEMA)
    # A projection of its own, so the payload is parsed once (see dumps._parsed).
    parsed = entries.select("*", payload.alias("_p"))
    author = F.when(F.col("kind") == "identity-op", F.col("chainId")).otherwise(F.col("_p.did"))
    return parsed.select(
        *entries.columns,
        F.col("_p.did").alias("did"),
        F.col("_p.previousOperationCID").alias("previousCid"),
        F.col("_p.targetCID").alias("targetCid"),
        created_at_ms("_p.createdAt").alias("createdMs"),
        author.alias("author"),
    )


def _unbase64url(segment: Column) -> Column:
    """base64url (unpadded) to bytes, null when it is not base64: map the
    alphabet, then ``try_to_binary``.

    Two ``replace`` calls rather than ``translate`` (which looks every
    character up in a map, about 2x slower here), and no ``=`` padding
    (``concat`` + ``repeat`` cost a quarter of the decode): padding is
    optional to the decoder. Not ``unbase64``: it throws, ANSI mode or not,
    on a segment whose length is 1 mod 4 or whose ``=`` are misplaced, and
    one such token in a dump failed the whole job (``try_to_binary`` costs
    about 25% more than ``unbase64`` on the decode alone).
    ``test_unpadded_base64url_decodes`` and ``test_undecodable_tokens`` pin
    both behaviours.
    """
    std = F.replace(F.replace(segment, F.lit("-"), F.lit("+")), F.lit("_"), F.lit("/"))
    return F.try_to_binary(std, F.lit("base64"))


def chain_heads(table: DataFrame, relays: list[str]) -> DataFrame:
    """Per relay and chain: ``relay, chainId, kind, head, headMs, tips``.

    ``table`` is the token table of ``spark.tokens`` (one row per distinct
    entry with its relay bitmask words). An op is a tip for a relay that
    holds it and holds none of its children: its tip words are its own
    words minus the OR of its children's words (children grouped by
    ``(chainId, kind, previousCid)``, so only children the same relay claims
    in the same chain count).
    """
    words = word_names(len(relays))
    ops = table.where(F.col("kind").isin(*CHAIN_KINDS)).select(
        "cid", "chainId", "kind", "previousCid", "createdMs", *words
    )
    children = (
        ops.where(F.col("previousCid").isNotNull())
        .groupBy("chainId", "kind", F.col("previousCid").alias("cid"))
        .agg(*[F.bit_or(w).alias(f"_c{w}") for w in words])
    )
    tips = ops.join(children, ["chainId", "kind", "cid"], "left").select(
        "chainId",
        "kind",
        "cid",
        "createdMs",
        *[_without(w, f"_c{w}").alias(w) for w in words],
    )
    per_relay = tips.select(
        F.explode(held_by(relays)).alias("relay"), "chainId", "kind", "cid", "createdMs"
    )
    by_chain = per_relay.groupBy("relay", "chainId", "kind").agg(
        F.max(F.struct("createdMs", "cid")).alias("best"), F.count("*").alias("tips")
    )
    return by_chain.select(
        "relay",
        "chainId",
        "kind",
        F.col("best.cid").alias("head"),
        F.col("best.createdMs").alias("headMs"),
        "tips",
    )


def _without(word: str, other: str) -> Column:
    """``word & ~other`` (a missing ``other`` clears nothing)."""
    return F.col(word).bitwiseAND(F.bitwise_not(F.coalesce(F.col(other), F.lit(0))))
