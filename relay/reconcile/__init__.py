"""Range-based set reconciliation between relays (Negentropy V1)."""
