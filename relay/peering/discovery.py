"""Peer discovery (issue 15: "an operator opts in to learning peers of
peers, with bounds"), as one pure selection over the ``PeerDirectory``.

Depth 1 per refresh: only what the *configured* peers advertise is read
(a learned peer's own list is not followed until an operator configures
it), so a single hostile peer can add at most ``room`` entries and cannot
make us crawl. An entry is learned only when it names a DID (we dedup by
DID, and never add ourselves, which we recognise by DID only), is not
already a peer by URL or DID, and fits the bound.

At most ``per_host`` peers (configured ones included) per host name,
whatever their ports or paths: every gossip peer holds a connection of the
pool all peers share while it is pushed to (and another while its document
is read), and a hostile list naming 64 URLs on one host of its own (made-up
DIDs) would otherwise hold 64 of them. A relay usually has one peer per
host; an operator who peers with several relays behind one host configures
them. Not bounded: many host names that resolve to one address.

Learned peers become gossip peers only (they take part in fan-out, as
coordinators and as share members). They are not synced, read through or
reconciled: those pull from a peer and cost more, and reconciliation stays
the operator's backstop over links they chose.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from urllib.parse import urlsplit

from .config import PEER_DISCOVERY_PER_HOST
from .directory import Advertised, PeerDirectory

log = logging.getLogger("dfos_relay.peering")


def host_of(url: str) -> str:
    """The host name of a peer URL (lower case; no port, no path)."""
    return urlsplit(url).hostname or ""


def learn_peers(
    directory: PeerDirectory,
    configured: Sequence[str],
    self_did: str,
    room: int,
    per_host: int = PEER_DISCOVERY_PER_HOST,
) -> list[Advertised]:
    """New peers to add, at most ``room``, and at most ``per_host`` peers
    (known ones included) per host name, in configured-peer order."""
    if room <= 0:
        return []
    known_urls = set(directory.urls)
    known_dids = {did for url in known_urls if (did := directory.did_of(url)) is not None}
    on_host = Counter(host_of(url) for url in known_urls)
    out: list[Advertised] = []
    crowded = 0
    for entry in (e for url in configured for e in directory.peers_of(url) or ()):
        if entry.did is None or entry.did == self_did:
            continue
        if entry.url in known_urls or entry.did in known_dids:
            continue
        if on_host[host_of(entry.url)] >= per_host:
            crowded += 1
            continue
        known_urls.add(entry.url)
        known_dids.add(entry.did)
        on_host[host_of(entry.url)] += 1
        out.append(entry)
        if len(out) >= room:
            break
    if crowded:
        log.info("discovery: %d advertised peers not learned: %d per host", crowded, per_host)
    return out
