"""The bounds of one reconcile run against a hostile or huge peer (draft
section 9): rounds, bytes each way, wall time, ids each way, busy waits.

Data only, apart from ``relay.reconcile.initiator`` that enforces them, so
that the settings and the ``dfos-relay`` parser can name the defaults
without loading the reconciliation machinery (peer clients, Negentropy,
the store's types).
"""

from __future__ import annotations

from dataclasses import dataclass

from .answers import TAKEN_PER_PEER


@dataclass(frozen=True, slots=True)
class ReconcileBounds:
    max_rounds: int = 64
    max_bytes: int = 64 * 1024 * 1024  # each way, per run
    deadline_s: float = 300.0
    frame_limit: int = 512 * 1024  # asked of the peer, and kept ourselves
    # ids a run collects to fetch: 64 rounds of 512 KiB frames could name
    # ~1M (some 250 MB held and 1,000 fetch requests); 100k is 100 fetches
    # of 1000 and ~10 MB, and a larger honest difference takes more runs
    max_need: int = 100_000
    # ids a run collects to push: a peer claiming to lack everything names
    # our whole store; 100k is 3.2 MB of ids and at most 1,000 posts of 100
    # (read from the store 1000 at a time), and the rest is for later runs;
    # no more than the ids a peer answered ``new`` to that we can remember
    max_have: int = TAKEN_PER_PEER
    # busy answers (``PeerBusy``) a run waits out; the next one fails it
    busy_waits: int = 3
    # the longest wait for one of them, whatever the peer asks (the peering
    # backoff's own cap): a peer cannot park a run for its whole deadline
    busy_wait_max_s: float = 60.0
