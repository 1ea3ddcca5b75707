"""Precheck a request's ops before the serialized sequencing pass.

Sequencing is serialized across every process sharing a store, so the CPU
it spends limits the whole relay. Deriving CIDs and checking signatures
needs no chain state, so it runs here, concurrently, before the session
(see ``relay/protocol/precheck.py``). The candidate keys for each ``kid``
come from the signer's key history in the store and from the identity ops
of the same request; the session still decides whether the key is valid.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Collection, Sequence

from relay.protocol import (
    MAX_KEYS_PER_ROLE,
    ProtocolError,
    decode_multikey,
    did_from_genesis_cid,
    split_kid,
)
from stores.base import ProofReader

from .common import Submitted
from .parallel import PrecheckPool
from .view import StateView

KeyIndex = dict[str, dict[str, set[bytes]]]  # did -> key id -> raw public keys


async def precheck_submitted(
    submitted: Sequence[tuple[int, Submitted]],
    sequenced: Collection[str] | None,
    store: ProofReader,
    pool: PrecheckPool | None = None,
) -> list[tuple[int, Submitted]]:
    """``submitted`` with CIDs derived and signatures checked where a key is known
    (on ``pool``'s threads if given, else inline).

    Ops already ``sequenced`` (None: ask the store, in the same breath as the
    signers' keys) are left alone: they will answer ``duplicate``."""
    signers = {i: _signer(sub) for i, sub in submitted}
    dids = {signer[0] for signer in signers.values() if signer is not None and signer[0]}
    known: Collection[str]
    if sequenced is None:
        cids = {sub.cid for _, sub in submitted}
        known, stored = await store.sequenced_and_keys(cids, dids)
    else:
        known, stored = sequenced, await store.get_identity_keys(dids)
    fresh = [(i, sub) for i, sub in submitted if sub.cid not in known]
    if not fresh:
        return list(submitted)
    keys: KeyIndex = defaultdict(lambda: defaultdict(set))
    for i, sub in fresh:
        _index_identity_keys(sub, signers[i], keys)
    for did, records in stored.items():
        for record in records:
            try:
                raw = decode_multikey(record.public_key_multibase)
            except ProtocolError:
                continue
            keys[did][record.key_id].add(raw)
    jobs = [(sub.decoded, _candidates(sub, keys, signers[i])) for i, sub in fresh]
    decoded = await (pool or _INLINE).run(jobs)
    # By position: one request may carry two tokens under one CID.
    checked = {
        i: Submitted(d, sub.cid, sub.kind, sub.token_hash)
        for (i, sub), d in zip(fresh, decoded, strict=True)
    }
    return [(i, checked.get(i, sub)) for i, sub in submitted]


_INLINE = PrecheckPool(threads=1)


def _candidates(
    sub: Submitted, keys: KeyIndex, signer: tuple[str | None, str] | None
) -> set[bytes]:
    if signer is not None:
        did, key_id = signer
        owner = did if did is not None else _genesis_did(sub)
        if owner is not None:
            return keys.get(owner, {}).get(key_id, set())
    return set()


def _signer(sub: Submitted) -> tuple[str | None, str] | None:
    kid = sub.decoded.kid
    if kid is None:
        return None
    try:
        return split_kid(kid)
    except ProtocolError:
        return None


def _genesis_did(sub: Submitted) -> str | None:
    """The DID an identity genesis claims (a bare kid names one of its own keys)."""
    if sub.kind != "identity-op" or sub.payload.get("previousOperationCID") is not None:
        return None
    try:
        return did_from_genesis_cid(sub.cid)
    except ProtocolError:
        return None


def _index_identity_keys(
    sub: Submitted, signer: tuple[str | None, str] | None, keys: KeyIndex
) -> None:
    """Keys an identity op of this request introduces, as later ops may sign with them.

    Only candidates: the payload is read, not validated (the sequencing pass
    parses it and decides), so a malformed entry is simply skipped."""
    if sub.kind != "identity-op":
        return
    payload = sub.payload
    did = _genesis_did(sub) if payload.get("type") == "create" else (signer[0] if signer else None)
    if did is None:
        return
    for role in KEY_ROLES:
        entries = payload.get(role)
        if not isinstance(entries, list) or len(entries) > MAX_KEYS_PER_ROLE:
            continue
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            key_id, multibase = entry.get("id"), entry.get("publicKeyMultibase")
            if isinstance(key_id, str) and isinstance(multibase, str):
                with contextlib.suppress(ProtocolError):
                    keys[did][key_id].add(decode_multikey(multibase))


KEY_ROLES = ("authKeys", "assertKeys", "controllerKeys")


async def precheck_round(
    round_: list[tuple[int | None, Submitted]], view: StateView, pool: PrecheckPool
) -> list[tuple[int | None, Submitted]]:
    """``round_`` with the signatures that still lack a checked key checked
    (on ``pool``'s threads) against the keys the session's view holds now and
    those the round's own identity ops introduce.

    Ops woken from the buffer, or whose signer arrived after their request's
    precheck, would otherwise be verified one by one in the serialized pass."""
    unchecked = [n for n, (_, sub) in enumerate(round_) if sub.decoded.verified_key is None]
    if not unchecked:
        return round_
    introduced: KeyIndex = defaultdict(lambda: defaultdict(set))
    for _, sub in round_:
        if sub.kind == "identity-op":
            _index_identity_keys(sub, _signer(sub), introduced)
    todo, jobs = [], []
    for n in unchecked:
        sub = round_[n][1]
        signer = _signer(sub)
        candidates = set(_candidates(sub, introduced, signer))
        if signer is not None and signer[0] is not None:
            # a key not known yet: the verifier reports it (or the op waits)
            with contextlib.suppress(ProtocolError):
                candidates.update(view.resolve_key(sub.decoded.kid or ""))
        if candidates:
            todo.append(n)
            jobs.append((sub.decoded, candidates))
    if not jobs:
        return round_
    out = list(round_)
    for n, decoded in zip(todo, await pool.run(jobs), strict=True):
        index, sub = out[n]
        out[n] = (index, Submitted(decoded, sub.cid, sub.kind, sub.token_hash))
    return out
