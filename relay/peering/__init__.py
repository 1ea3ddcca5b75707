"""Relay-to-relay peering logic: gossip-out, read-through and sync-in
(WEB-RELAY.md "Peering", "Convergence"). Transport lives in ``peer/``."""
