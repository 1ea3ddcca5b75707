"""The store's self-audit (``dfos-relay verify-store``).

Role: rebuild every chain from the stored ops through the protocol's pure
verification, in log order, and compare the result with every stored row:
ops that no longer verify, columns, heads and states that differ, log gaps
and duplicates, and rows that hang off nothing. ``audit_store`` reads one
consistent snapshot of the store and never writes or locks anything a
relay's ingestion needs.

Invariants: a store written only by this relay's ingestion (and purges)
audits clean; every finding names its row. Memory: the replay keeps each
op's kind, chain, signer, createdAt and state snapshot, and each identity's
keys - about the size of the ops table without its tokens.
"""

from .findings import KINDS, AuditReport, Finding
from .run import audit_store

__all__ = ["KINDS", "AuditReport", "Finding", "audit_store"]
