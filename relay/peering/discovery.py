"""Peer discovery (issue 15: "an operator opts in to learning peers of
peers, with bounds"), as one pure selection over the ``PeerDirectory``.

Depth 1 per refresh: only what the *configured* peers advertise is read
(a learned peer's own list is not followed until an operator configures
it), so a single hostile peer can add at most ``room`` entries and cannot
make us crawl. An entry is learned only when it names a DID (we dedup by
DID, and never add ourselves, which we recognise by DID only), is not
already a peer by URL or DID, and fits the bound.

Learned peers become gossip peers only (they take part in fan-out, as
coordinators and as share members). They are not synced, read through or
reconciled: those pull from a peer and cost more, and reconciliation stays
the operator's backstop over links they chose.
"""

from __future__ import annotations

from collections.abc import Sequence

from .directory import Advertised, PeerDirectory


def learn_peers(
    directory: PeerDirectory, configured: Sequence[str], self_did: str, room: int
) -> list[Advertised]:
    """New peers to add, at most ``room``, in configured-peer order."""
    if room <= 0:
        return []
    known_urls = set(directory.urls)
    known_dids = {did for url in known_urls if (did := directory.did_of(url)) is not None}
    out: list[Advertised] = []
    for url in configured:
        for entry in directory.peers_of(url) or ():
            if entry.did is None or entry.did == self_did:
                continue
            if entry.url in known_urls or entry.did in known_dids:
                continue
            known_urls.add(entry.url)
            known_dids.add(entry.did)
            out.append(entry)
            if len(out) >= room:
                return out
    return out
