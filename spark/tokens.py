"""The token table: every distinct log entry once, with the relays holding it.

Role: the one shuffle over all entries. Relays' dumps mostly hold the same
ops, so the job collapses the entries of all relays into one row per distinct
``(cid, token, claimed kind and chain)`` and records who served it as a
bitmask of relay indices (``_w0``, ``_w1``, ... 64 relays per word, OR-ed
with ``bit_or``). Every later table (heads, holdings, relay stats,
``--verify``) reads this table instead of the per-relay entries, and the
aggregation stays a plain hash aggregation (long buffers, no per-row
objects). The table is hash-partitioned by ``cid``, so per-CID work after
it needs no further shuffle.

Invariants: relay indices are positions in the sorted relay names (so
``held_by`` lists relays sorted); a row's other columns are the entry's own
(nothing is merged across differing tokens or claims).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["held_by", "relay_bits", "token_table", "word_names"]

WORD_BITS = 64


def word_names(n_relays: int) -> list[str]:
    """The bitmask columns for ``n_relays`` relays: ``_w0``, ``_w1``, ..."""
    return [f"_w{w}" for w in range((n_relays + WORD_BITS - 1) // WORD_BITS)]


def relay_bits(n_relays: int, index: str = "relayIndex") -> list[Column]:
    """Aggregate expressions OR-ing each entry's relay bit into its word."""
    return [
        F.expr(
            f"bit_or(if({index} div {WORD_BITS} = {w}, shiftleft(1L, {index} % {WORD_BITS}), 0L))"
        ).alias(name)
        for w, name in enumerate(word_names(n_relays))
    ]


def held_by(relays: list[str], words: list[str] | None = None) -> Column:
    """Sorted names of the relays whose bit is set in ``words``."""
    names = sorted(relays)
    cols = words or word_names(len(names))

    def bit(i: int) -> Column:
        word = F.col(cols[i // WORD_BITS])
        return F.shiftright(word, i % WORD_BITS).bitwiseAND(1) == 1

    return F.array_compact(F.array(*[F.when(bit(i), F.lit(r)) for i, r in enumerate(names)]))


def token_table(decoded: DataFrame, relays: list[str], partitions: int) -> DataFrame:
    """One row per distinct entry (all columns but ``relay``, ``relayIndex``)
    with its relay bitmask words; hash-partitioned by ``cid``."""
    keys = [c for c in decoded.columns if c not in ("relay", "relayIndex")]
    # Partitioning by cid alone satisfies the aggregation (its keys include
    # cid), so this is the only shuffle, and later per-CID steps reuse it.
    return decoded.repartition(partitions, "cid").groupBy(*keys).agg(*relay_bits(len(relays)))
