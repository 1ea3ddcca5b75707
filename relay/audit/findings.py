"""What a store audit can find, one value per problem.

Kinds (``Finding.kind``):

- ``op-invalid``     a stored op no longer verifies given the ops before it in
                     the log (signature, CID, chain rules, missing parent ...)
- ``op-row``         the op verifies, but its stored columns (kind, chainId,
                     signer, parent, createdAt, state snapshot) differ from it
- ``chain-head``     a chain row's head, genesis or kind differs from the
                     head rule over its ops (highest createdAt, then CID)
- ``chain-state``    a chain row's state differs from its head op's state
- ``missing-chain``  ops of a chain whose chain row is missing
- ``log-gap``        log positions missing (and not recorded as purged)
- ``log-duplicate``  a position or a CID stored twice
- ``orphan``         a row that hangs off nothing: a chain without ops, a key
                     of no state, a beacon, countersignature or blob row
                     without its op or creator, a buffered op already
                     sequenced, a buffered copy whose op is sequenced or not
                     buffered, or that its own token's hash does not name

``subject`` names the row (CID, chain id, DID, ...) and ``seq`` the log
position when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = (
    "op-invalid",
    "op-row",
    "chain-head",
    "chain-state",
    "missing-chain",
    "log-gap",
    "log-duplicate",
    "orphan",
)


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    subject: str
    detail: str
    seq: int | None = None

    def line(self) -> str:
        where = f"seq {self.seq} " if self.seq is not None else ""
        return f"{self.kind}: {where}{self.subject}: {self.detail}"


@dataclass(frozen=True, slots=True)
class AuditReport:
    operations: int  # op rows read
    chains: int  # chain rows read
    purged: int  # positions recorded as purged
    findings: tuple[Finding, ...]

    @property
    def clean(self) -> bool:
        return not self.findings
