"""Administration by DID (``/admin/`` routes; issue 16).

Role: who may administer (``auth``: a DID auth token of a listed operator
with the admin audience ``<relay DID>#admin``, which the content plane
refuses, verified against that identity's current keys on this relay), what they
may do (``service``: ban and unban with an optional purge, drop buffered
ops, peers, sync, log level, the replication ledger), and the record of it
(``audit``: one structured line per action, refusals included).

Invariants: a ban is stored before any purge starts, so nothing of the
banned DID lands while it is purged; a purge removes the DID's ops and
what hangs off them in one atomic moderation batch, records every removed
op, and starts a new changes-feed epoch. Every sequencing session reads
the bans of the signers its ops claim from the store, under the sequencing
lock the purge also holds, so every worker sharing a store refuses a banned
DID from its next batch on, and none takes a purged DID's ops back. Bans
are also cached per process (``bans.BanList``, brought up to date with the
bans changed in the store at most ``BAN_REFRESH_S`` apart): the gate's
answer for a signer a session did not read.
"""

from .auth import AdminCaller, AdminRefused, admin_audience, authenticate_admin
from .bans import BAN_REFRESH_S, BanList

__all__ = [
    "BAN_REFRESH_S",
    "AdminCaller",
    "AdminRefused",
    "BanList",
    "admin_audience",
    "authenticate_admin",
]
