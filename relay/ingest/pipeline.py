"""The ingestion pipeline: store-then-verify with targeted wake-ups
(WEB-RELAY.md "Operation Ingestion", "Convergence").

1. Decode and classify every token; malformed ones are rejected on their own
   line.
2. Precheck, outside any lock and on several threads: derive CIDs and check
   signatures against the keys the signers are known to hold (``precheck.py``,
   ``parallel.py``), so the serialized pass below spends its time on chain
   rules, not on cryptography. The write policy's function is asked about
   the ops so verified with no lock held either (``early.py``): the session
   waits on it only for ops it could not judge then.
3. In one serialized sequencing session: sort by dependency priority,
   prefetch the state the round can touch, verify op by op, stage what
   verifies and passes the write gate (``policy.py``). Ops that miss a
   dependency wait *indexed by that dependency*; each accepted op wakes
   only its own dependants (from this request and from the persistent
   buffer), which form the next round. No rescans. Ops held for the write
   policy's decision are decided together after the round (bounded) and
   attempted again in the next.
4. Commit the session atomically, then tell listeners (gossip) what is new.

Store-then-verify, folded into one transaction: an op that must wait is
written to the raw-op buffer by the commit of the session that parked it
(with the key it waits for); an op sequenced or rejected within its own
request never gets a buffer row. Another token of a waiting op's CID waits
beside it as a copy and is tried if that op is rejected, or is woken and
waits again (``_buffer``). A buffered op (or copy) the write policy fails
on stays buffered, waiting for the policy, and the relay tries it again
(``_kept_through``, ``retry.py``). An op that would wait but can only be
rejected once verified is rejected instead: its payload does not parse
(``_malformed_payload``), or it is dated beyond the future guard
(``_beyond_future_guard``).
Nothing is answered before that commit, so a crash before it loses nothing
a sender was told was kept.

``results[i]`` answers ``tokens[i]`` with the op's final outcome: an op that
waits and is woken within the same request answers ``new``, and so does a
copy tried and sequenced within it.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence

from relay.protocol import (
    DecodedJws,
    ProtocolError,
    check_cid,
    check_typ_not_future,
    check_typ_payload,
    cid_of,
    decode_jws,
    is_cid,
    token_hash,
)
from relay.rules.classify import classify
from relay.rules.outcomes import (
    IngestionResult,
    Rejected,
    RejectReason,
    SequencedOp,
    Status,
    from_recorded_text,
    recorded_text,
)
from stores.base import OperationRecord, PendingOp, Rejection, RelayStore, waits_for_policy

from .common import (
    Accepted,
    Duplicate,
    Outcome,
    Submitted,
    depends_on_op,
    kid_did,
    rejection_for,
)
from .content import ingest_content
from .countersign import ingest_countersign
from .early import ask_early
from .identity import ingest_identity
from .notes import RejectionEvent, RejectionNotes, rejection_event
from .order import causal_order, wake_keys
from .parallel import PrecheckPool
from .policy import EarlyDecisions, Held, Refused, WriteGate, claimed_signer
from .precheck import KEY_ROLES, precheck_round, precheck_submitted
from .standalone import ingest_artifact, ingest_beacon
from .view import Needs, StateView

Handler = Callable[[Submitted, StateView, int], Outcome]
HANDLERS: dict[str, Handler] = {
    "identity-op": ingest_identity,
    "content-op": ingest_content,
    "beacon": ingest_beacon,
    "artifact": ingest_artifact,
    "countersign": ingest_countersign,
}


# what a kept op rejected by the give-up says (``WritePolicy.retry_give_up_s``)
GAVE_UP = "the relay gave up retrying it (it waited for the write policy too long)"

Listener = Callable[[Sequence[SequencedOp], str | None], Awaitable[None] | None]
Clock = Callable[[], int]  # wall clock, epoch milliseconds


def prepare(token: object) -> Submitted | IngestionResult:
    """Decode and classify one token, or answer its rejection."""
    if not isinstance(token, str):
        return _rejected("", RejectReason.MALFORMED, "operation must be a string")
    try:
        decoded = decode_jws(token)
    except ProtocolError as exc:
        return _rejected("", RejectReason.MALFORMED, f"malformed token: {exc}")
    header_cid = decoded.header_cid
    kind = classify(decoded.typ)
    if kind is None:
        cid = header_cid if isinstance(header_cid, str) else ""
        return _rejected(cid, RejectReason.UNKNOWN_TYPE, f"unknown typ {decoded.typ!r}")
    if not isinstance(header_cid, str) or not is_cid(header_cid):
        try:
            derived = cid_of(decoded.payload)
        except ProtocolError as exc:
            return _rejected("", RejectReason.MALFORMED, str(exc))
        return _rejected(derived, RejectReason.CID_MISMATCH, "missing or invalid cid header")
    nul = _nul_identifier(decoded, kind)
    if nul is not None:
        return _rejected(header_cid, RejectReason.MALFORMED, f"{nul} must not contain NUL")
    return Submitted(decoded, header_cid, kind, token_hash(token))


_REFERENCES = ("did", "previousOperationCID", "targetCID")


def _nul_identifier(decoded: DecodedJws, kind: str) -> str | None:
    """The field, if any, of an identifier the relay looks up or stores that
    holds NUL. No CID or DID holds one, so such a reference could never be
    satisfied; and a Postgres text column cannot hold NUL, so an op parked
    under it, or an identity with such a key id, would fail its whole batch
    there while SQLite and memory stored it."""
    kid = decoded.kid
    if kid is not None and "\x00" in kid:
        return "kid"
    payload = decoded.payload
    for field in _REFERENCES:
        value = payload.get(field)
        if isinstance(value, str) and "\x00" in value:
            return field
    if kind == "identity-op":
        for role in KEY_ROLES:
            entries = payload.get(role)
            if isinstance(entries, list):
                for entry in entries:
                    key_id = entry.get("id") if isinstance(entry, dict) else None
                    if isinstance(key_id, str) and "\x00" in key_id:
                        return f"{role} key id"
    return None


def _rejected(cid: str, reason: RejectReason, detail: str) -> IngestionResult:
    return IngestionResult(cid, Status.REJECTED, error=detail, reason=reason)


class Ingestor:
    """Serializes all chain-state changes of one relay process."""

    def __init__(
        self,
        store: RelayStore,
        clock: Clock,
        max_pending: int,
        max_rejection_notes: int,
        gate: WriteGate | None = None,
        verify_threads: int | None = None,
        *,
        max_copies: int,
    ) -> None:
        self._store = store
        self._pool = PrecheckPool(verify_threads)
        self._clock = clock
        self._max_pending = max_pending
        self._max_copies = max_copies  # per waiting op (RelayConfig.max_copies_per_op)
        self.rejections = RejectionNotes(store, max_rejection_notes)
        self.gate = gate
        self._lock = asyncio.Lock()
        self._listeners: list[Listener] = []
        # Decoded form of the ops this process buffered, so a wake-up does not
        # decode them again; only an accelerator (checked against the stored
        # token), bounded by max_pending.
        self._prepared: dict[str, Submitted] = {}
        # told, after each commit, the CIDs whose buffered op the write policy
        # failed on (kept, waiting for the policy): see ``retry_kept``
        self.on_kept: Callable[[], None] | None = None
        # batches committed (or committing) and not yet told to the listeners
        self._untold = 0

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def quiet(self) -> bool:
        """True while no batch of this process is between its commit and
        the end of telling the listeners of it: every op it committed so
        far was told (the out-links' heads follow the store's only then)."""
        return self._untold == 0

    def close(self) -> None:
        """Stop the precheck threads (they are started again on demand)."""
        self._pool.close()

    async def ingest(
        self, tokens: Sequence[object], source: str | None = None
    ) -> list[IngestionResult]:
        prepared = [prepare(t) for t in tokens]
        submitted = [(i, p) for i, p in enumerate(prepared) if isinstance(p, Submitted)]
        if submitted:
            # No buffer row up front: the session's commit buffers what waits.
            submitted = await precheck_submitted(submitted, None, self._store, self._pool)
        asked: EarlyDecisions = {}
        if submitted and self.gate is not None:  # the policy, asked with no lock held
            asked = await ask_early(self.gate, submitted, self._store)
        run, sequenced = await self._run(submitted, early=asked)
        outcomes, events = run.outcomes, run.events
        await self._notify(sequenced, source)
        now = self._clock()
        early = [
            _early_event(p, t, now) for t, p in zip(tokens, prepared, strict=True)
            if isinstance(p, IngestionResult)
        ]  # fmt: skip
        await self.rejections.record(early + events)
        return [
            p if isinstance(p, IngestionResult) else _result(p, outcomes[i])
            for i, p in enumerate(prepared)
        ]

    async def drain_buffer(self, page: int = 500) -> int:
        """Re-attempt every buffered op once (after a restart); returns how many
        were sequenced. Ops still missing dependencies stay buffered."""
        total, after = 0, None
        while True:
            pending = await self._store.get_unsequenced(page, after)
            if not pending:
                return total
            after = pending[-1].cid
            subs = [(None, s) for p in pending if isinstance(s := prepare(p.jws_token), Submitted)]
            run, sequenced = await self._run(subs, prechecked=False)
            await self._notify(sequenced, None)
            await self.rejections.record(run.events)
            total += len(sequenced)

    async def retry_kept(self, page: int = 500) -> int:
        """Attempt again every op the store keeps waiting for the write
        policy, whichever process kept it (this one, another sharing the
        store, or one before a restart), a page at a time; returns how many
        it kept again (the policy failed on them again). Through the same
        serialized sequencing as any op, so what they wake follows; the
        policy is asked outside it (``_retry_page``)."""
        kept, after = 0, None
        while True:
            waiting = await self._store.get_waiting_for_policy(page, after)
            if not waiting:
                return kept
            after = waiting[-1].cid
            kept += await self._retry_page(waiting)

    async def _retry_page(self, waiting: Sequence[PendingOp]) -> int:
        """Two sessions, and the policy asked between them with no lock held
        (``WriteGate.ask``), so a hanging policy holds up no other ingestion:
        the first verifies the ops and settles what needs no policy (a
        duplicate another worker sequenced, a ban, a conflict, a policy
        removed), and collects the ops the policy must judge; the second
        attempts those with its decisions. An op waiting for the policy for
        ``retry_give_up_s`` or more that the policy fails on again is
        rejected (``policy-error``, not recorded), no longer kept."""
        subs = [(None, s) for p in waiting if isinstance(s := prepare(p.jws_token), Submitted)]
        first = await self._session(subs, defer_policy=True)
        if not first.deferred or self.gate is None:
            return 0
        ask = [(op, sub.payload) for sub, op in first.deferred]
        decisions = await self.gate.ask(ask)
        give_up_ms = self.gate.policy.retry_give_up_s * 1000
        now = self._clock()
        expired = {
            p.cid for p in waiting if p.since_ms is not None and now - p.since_ms >= give_up_ms
        }
        retried = [(None, sub) for sub, _ in first.deferred]
        second = await self._session(retried, decided=decisions, give_up=expired)
        return len(second.kept_for_policy)

    async def _session(
        self,
        subs: Sequence[tuple[int | None, Submitted]],
        *,
        defer_policy: bool = False,
        decided: Mapping[str, Rejected | None] | None = None,
        give_up: Collection[str] = (),
    ) -> _Sequencing:
        """One session of buffered ops (no request lines), its news told."""
        run, sequenced = await self._run(
            subs, prechecked=False, defer_policy=defer_policy, decided=decided, give_up=give_up
        )
        await self._notify(sequenced, None)
        await self.rejections.record(run.events)
        return run

    async def _run(
        self,
        submitted: Sequence[tuple[int | None, Submitted]],
        prechecked: bool = True,
        *,
        defer_policy: bool = False,
        decided: Mapping[str, Rejected | None] | None = None,
        give_up: Collection[str] = (),
        early: EarlyDecisions | None = None,
    ) -> tuple[_Sequencing, list[SequencedOp]]:
        committing = False
        try:
            async with self._lock, self._store.sequencing() as session:
                view = StateView(session)
                view.gate = self.gate
                run = _Sequencing(
                    view, self._clock(), self._max_pending, self._prepared, self._pool, prechecked,
                    self._max_copies, defer_policy=defer_policy, give_up=give_up,
                )  # fmt: skip
                if decided and self.gate is not None:
                    self.gate.preset(decided)  # asked before the session (``_retry_page``)
                if early and self.gate is not None:
                    self.gate.preset_early(early)  # asked before the session (``ingest``)
                try:
                    await run.sequence(list(submitted))
                finally:
                    if self.gate is not None:
                        self.gate.forget()
                batch = run.view.batch
                if batch.is_empty():
                    return run, []
                if batch.operations:  # told by ``_notify``: until then not ``quiet``
                    self._untold += 1
                    committing = True
                head = await session.commit(batch)
                if run.kept_for_policy and self.on_kept is not None:
                    self.on_kept()
                first = head - len(batch.operations) + 1
                sequenced = [
                    SequencedOp(
                        op.cid,
                        op.jws_token,
                        op.kind,
                        op.chain_id,
                        seq,
                        op.created_at_ms,
                        op.author_did,
                    )
                    for seq, op in enumerate(batch.operations, start=first)
                ]
                return run, sequenced
        except BaseException:
            if committing:
                self._untold -= 1
            raise

    async def _notify(self, sequenced: list[SequencedOp], source: str | None) -> None:
        if not sequenced:
            return
        try:
            for listener in self._listeners:
                maybe = listener(sequenced, source)
                if maybe is not None:
                    await maybe
        finally:
            self._untold -= 1


def _early_event(result: IngestionResult, token: object, now_ms: int) -> RejectionEvent:
    """A token refused before sequencing (it did not decode or classify)."""
    reason = result.reason or RejectReason.MALFORMED
    digest = token_hash(token) if isinstance(token, str) else ""
    return rejection_event(result.cid, reason, result.error or "", now_ms, digest, remember=True)


def _result(sub: Submitted, outcome: Outcome) -> IngestionResult:
    if isinstance(outcome, Accepted):
        return IngestionResult(sub.cid, Status.NEW, outcome.kind, outcome.chain_id)
    if isinstance(outcome, Duplicate):
        return IngestionResult(sub.cid, Status.DUPLICATE, outcome.kind, outcome.chain_id)
    return IngestionResult(
        sub.cid, Status.REJECTED, sub.kind, error=outcome.message, reason=outcome.reason,
        waits_for=outcome.waits_for,
    )  # fmt: skip


class _Sequencing:
    """One session's rounds of verify-and-wake."""

    def __init__(
        self,
        view: StateView,
        now_ms: int,
        max_pending: int,
        prepared: dict[str, Submitted],
        pool: PrecheckPool,
        prechecked: bool,
        max_copies: int,
        *,
        defer_policy: bool = False,
        give_up: Collection[str] = (),
    ) -> None:
        self.view = view
        # held ops are not decided in this session but collected in
        # ``deferred``, for the policy to judge after it (``_retry_page``)
        self._defer_policy = defer_policy
        self.deferred: list[tuple[Submitted, OperationRecord]] = []
        # CIDs given up on: the policy failing on them again rejects them
        self._give_up = frozenset(give_up)
        self._max_copies = max_copies
        self._pool = pool
        self._prechecked = prechecked  # the first round's ops (a request's) are
        self._prepared = prepared
        if len(prepared) > max_pending:  # entries resolved by another process
            prepared.clear()
        self.now_ms = now_ms
        self.outcomes: dict[int, Outcome] = {}
        self.events: list[RejectionEvent] = []  # every rejection decided here
        # Ops parked in this session, one entry per CID (the freshest reason it
        # waits, and the request index it answers if any), indexed by key.
        self._parked: dict[str, tuple[int | None, Submitted, str]] = {}
        self._waiting: dict[str, set[str]] = defaultdict(set)
        self._room = max_pending
        # Ops waiting in the store's buffer when the session began; the
        # session holds the sequencing lock, so if none were, none appear.
        self._buffered_waiting = 0
        # Keys already followed in the buffer: it does not change during the
        # session, and ``take_waiting`` followed the "op:" key of each op taken.
        self._followed: set[str] = set()
        # Ops verified this round whose write-policy decision is pending.
        self._held: list[tuple[int | None, Submitted, OperationRecord]] = []
        # CIDs whose buffered op this session parked with its signature
        # checked as claimed: another token does not take its place.
        self._checked_holders: set[str] = set()
        # CIDs whose buffered op left by rejection, or was woken and waits
        # again (for what its copies may not lack): their copies are tried next.
        self._promote: set[str] = set()
        self._woken: set[str] = set()  # CIDs of ops woken in this session
        self._copy_keys: set[tuple[str, str]] = set()  # (CID, token hash) of copies taken
        self._stored_copies_taken: set[tuple[str, str]] = set()  # those the store held
        # the request line each copy staged from this session's request answers
        self._copy_lines: dict[tuple[str, str], int] = {}
        self._lines: dict[int, Submitted] = {}  # the request's lines
        self._settled: set[int] = set()  # lines tried again at the end (at most once)
        # CIDs whose buffered op now waits for the write policy (it failed on it)
        self.kept_for_policy: set[str] = set()

    async def sequence(self, round_: list[tuple[int | None, Submitted]]) -> None:
        first = True
        self._lines = {index: sub for index, sub in round_ if index is not None}
        while round_:
            round_ = causal_order(round_)
            # The buffer's fill level comes with the first round's reads.
            pending = await self.view.prefetch(_needs(round_), count_pending=first)
            if not (first and self._prechecked):  # a request's ops were, before the session
                round_ = await precheck_round(round_, self.view, self._pool)
            if first:
                self._buffered_waiting = pending or 0
                self._room -= self._buffered_waiting
                first = False
            woken: list[str] = []
            for index, sub in round_:
                woken.extend(self._attempt(index, sub))
            round_ = await self._wake(woken)
            if self._promote:
                round_ += await self._take_copies()
            if self._held:
                round_ = await self._decide_held(round_)
            if not round_:
                round_ = self._lines_left_behind()

    def _lines_left_behind(self) -> list[tuple[int | None, Submitted]]:
        """The request lines answered waiting whose token the commit would
        not keep buffered (as its CID's op or as a copy beside it): another
        token of its CID was sequenced, or the same token through another
        line, and it went untried. Each is tried once more, so its line
        answers what sending it again would; a line is tried so at most once."""
        out: list[tuple[int | None, Submitted]] = []
        for index, sub in self._lines.items():
            outcome = self.outcomes.get(index)
            if not isinstance(outcome, Rejected) or outcome.waits_for is None:
                continue
            if index not in self._settled and not self._kept(sub):
                self._settled.add(index)
                out.append((index, sub))
        return out

    def _kept(self, sub: Submitted) -> bool:
        """The commit leaves ``sub``'s token buffered: as its CID's op, or
        as a copy beside it."""
        batch, cid = self.view.batch, sub.cid
        held = batch.waiting.get(cid)
        if held is not None and held.jws_token == sub.token:
            return True
        if cid in batch.resolved_cids and held is None:
            return False  # the CID leaves the buffer, its copies with it
        if held is None and self.view.buffered_token(cid) == sub.token:
            return True
        return self._kept_copy(sub)

    async def _decide_held(
        self, round_: list[tuple[int | None, Submitted]]
    ) -> list[tuple[int | None, Submitted]]:
        """Ask the write policy about the held ops (bounded), then retry them."""
        held, self._held = self._held, []
        cids = {sub.cid for _, sub, _ in held}
        if self._defer_policy:  # left as they are in the buffer, for now
            self.deferred.extend((sub, op) for _, sub, op in held)
            return [item for item in round_ if item[1].cid not in cids]
        gate = self.view.gate
        assert gate is not None
        await gate.decide([(op, sub.payload) for _, sub, op in held])
        retried = [(index, sub) for index, sub, _ in held]
        return retried + [item for item in round_ if item[1].cid not in cids]

    def _attempt(self, index: int | None, sub: Submitted) -> tuple[str, ...]:
        batch = self.view.batch
        recorded = self.view.rejection(sub.token_hash)
        if recorded is not None:  # refused for good before: the same answer again
            reason, message = from_recorded_text(recorded.reason)
            outcome: Outcome = Rejected(reason, message)
            self._leave_buffer(index, sub)
            self._event(sub, reason, message, remember=False)
        else:
            try:
                outcome = HANDLERS[sub.kind](sub, self.view, self.now_ms)
            except Held as held:  # verified; the policy decides after this round
                self._unpark(sub)
                self._held.append((index, sub, held.op))
                return ()
            except Refused as refused:
                outcome = refused.rejected
            if isinstance(outcome, Rejected) and outcome.waits_for is not None:
                # The buffer is keyed by CID: an op parked under a CID its
                # payload does not have could take the place of the op that has it.
                outcome = (
                    _malformed_payload(sub)
                    or _claimed_cid_holds(sub)
                    or _beyond_future_guard(sub, self.now_ms)
                    or self._banned_claim(sub)
                    or outcome
                )
        if index is not None:
            self.outcomes[index] = outcome
        self._prepared.pop(sub.cid, None)
        if not isinstance(outcome, Rejected) or outcome.waits_for is None:
            self._unpark(sub)
        if isinstance(outcome, Accepted):
            batch.waiting.pop(sub.cid, None)
            return outcome.wakes
        if isinstance(outcome, Duplicate):
            batch.waiting.pop(sub.cid, None)
            batch.resolved_cids.add(sub.cid)
        elif recorded is None:
            self._reject(index, sub, outcome)
        return ()

    def _banned_claim(self, sub: Submitted) -> Rejected | None:
        """An op that would wait, claimed by a banned signer: refused now (it
        could only be refused once verified, and would hold a slot until then)."""
        gate = self.view.gate
        if gate is None:
            return None
        signer = claimed_signer(sub.decoded, sub.cid)
        return None if signer is None else gate.banned(signer, self.view.bans)

    def _reject(self, index: int | None, sub: Submitted, rejected: Rejected) -> None:
        if rejected.waits_for is not None:
            holder = self._holder(sub.cid)
            # A token new to the buffer takes a slot; ops replayed from the
            # buffer (index None) and copies sent again already hold theirs.
            if index is not None and holder != sub.token and not self._kept_copy(sub):
                if self._copies_full(sub, holder):
                    self._full(index, sub, "too many other tokens of this operation are waiting")
                    return
                self._room -= 1
                if self._room < 0:
                    self._room += 1
                    self._full(index, sub, "pending buffer is full")
                    return
            self._buffer(index, sub, rejected.waits_for, holder)
            if sub.cid in self._woken and self._holder(sub.cid) == sub.token:
                self._promote.add(sub.cid)
            return
        if rejected.reason is RejectReason.POLICY_ERROR and sub.cid in self._give_up:
            rejected = Rejected(rejected.reason, f"{rejected.message}; {GAVE_UP}")
        elif self._kept_through(sub, rejected):
            self._event(sub, rejected.reason, rejected.message)
            self._buffer(None, sub, waits_for_policy(sub.cid), self._holder(sub.cid))
            if self._holder(sub.cid) == sub.token:  # (a copy is tried after its op)
                self.kept_for_policy.add(sub.cid)
            return
        self._leave_buffer(index, sub)
        self._event(sub, rejected.reason, rejected.message)
        if rejected.reason.is_permanent:
            text = recorded_text(rejected.reason, rejected.message)
            self.view.stage_rejection(Rejection(sub.token_hash, sub.cid, text))

    def _kept_through(self, sub: Submitted, rejected: Rejected) -> bool:
        """A token buffered before this session (as its CID's op, or as a
        copy beside it) that the write policy failed on stays buffered: its
        sender was answered waiting and will not send it again (a line
        sending it again gets this attempt's answer), and a failed call says
        nothing about the op. It waits for the policy (``waits_for_policy``),
        and the relay attempts it again (``relay.ingest.retry``), as does a
        restart's drain or the op sent again. A copy is placed as ``_buffer``
        places any token that waits: it stays a copy, or takes the place of
        the CID's op if that op has left the buffer (rejected) or is not
        known to be signed as claimed; only the CID's op is retried (a copy
        is tried when its op is rejected or woken, as ever)."""
        if rejected.reason is not RejectReason.POLICY_ERROR:
            return False
        if self._holder(sub.cid) == sub.token:
            return self.view.buffered_token(sub.cid) == sub.token
        key = (sub.cid, sub.token_hash)
        stored = key in self._stored_copies_taken or sub.token_hash in self.view.stored_copies(
            sub.cid
        )
        return stored and key not in self.view.batch.copies_gone

    def _full(self, index: int, sub: Submitted, why: str) -> None:
        """``sub`` is answered ``buffer-full``, and is not kept."""
        full = Rejected(RejectReason.BUFFER_FULL, f"{why}; resubmit later")
        self.outcomes[index] = full
        self._event(sub, full.reason, full.message)

    def _kept_copy(self, sub: Submitted) -> bool:
        """``sub`` waits as a copy already (staged, or stored and not gone)."""
        key, batch = (sub.cid, sub.token_hash), self.view.batch
        if key in batch.copies:
            return True
        return sub.token_hash in self.view.stored_copies(sub.cid) and key not in batch.copies_gone

    def _copies_full(self, sub: Submitted, holder: str | None) -> bool:
        """Keeping ``sub`` would put one copy more beside its CID's buffered
        op (``sub`` itself, or the op whose place it takes), and the CID has
        as many as a waiting op may keep. Never so for a token signed by the
        signer its payload names, which takes the buffered op's place: only
        that signer can make such tokens, and the op it displaces was
        answered waiting. An identity update names no signer, and any known
        identity's signature checks on it until its chain is known, so its
        tokens are counted like any copy."""
        if holder is None:
            return False
        displaces = _signed_as_claimed(sub) and sub.cid not in self._checked_holders
        if displaces and isinstance(sub.payload.get("did"), str):
            return False
        cid, batch = sub.cid, self.view.batch
        kept = {h for h in self.view.stored_copies(cid) if (cid, h) not in batch.copies_gone}
        kept.update(h for c, h in batch.copies if c == cid)
        return len(kept) >= self._max_copies

    def _event(
        self, sub: Submitted, reason: RejectReason, detail: str, *, remember: bool = True
    ) -> None:
        event = rejection_event(
            sub.cid, reason, detail, self.now_ms, sub.token_hash, remember=remember
        )
        self.events.append(event)

    def _buffer(
        self, index: int | None, sub: Submitted, waits_for: str, holder: str | None
    ) -> None:
        """Keep ``sub`` waiting: as the op buffered under its CID, or as a
        copy beside another token of that CID (``CommitBatch.copies``).

        Two senders' tokens of one payload can both wait, and only one may
        verify in the end (a forged signature, or one by another identity).
        Neither pushes the other out: a token whose signature checked as
        claimed takes the place of one not known to (which stays as a copy),
        any other waits as a copy, and when the buffered op is rejected (or
        woken and parked again) its copies are tried (``_take_copies``). So
        a token answered as waiting stays buffered until it is decided on its
        own merit."""
        batch, cid = self.view.batch, sub.cid
        verified = _signed_as_claimed(sub)
        since = self.now_ms  # unless the store already holds an earlier since for it
        if holder is not None and holder != sub.token:
            if not verified or cid in self._checked_holders:
                batch.stage_copy(sub.token_hash, PendingOp(cid, sub.token, waits_for, since))
                if index is not None:  # tried later in this session, it answers that line
                    self._copy_lines[(cid, sub.token_hash)] = index
                return
            held = batch.waiting.get(cid)
            displaced = PendingOp(cid, holder, "", held.since_ms if held else since)
            batch.stage_copy(token_hash(holder), displaced)
        stored = self.view.buffered_token(cid)
        replaces = stored is not None and stored != sub.token
        batch.resolved_cids.discard(cid)
        batch.waiting[cid] = PendingOp(cid, sub.token, waits_for, since, replaces=replaces)
        self._drop_copy(sub)  # a copy tried now holds the CID
        if verified:
            self._checked_holders.add(cid)
        else:
            self._checked_holders.discard(cid)
        self._prepared[cid] = sub
        self._park(index, sub, waits_for)

    def _holder(self, cid: str) -> str | None:
        """The token buffered under ``cid`` as this session leaves it so far."""
        batch = self.view.batch
        held = batch.waiting.get(cid)
        if held is not None:
            return held.jws_token
        if cid in batch.resolved_cids:
            return None
        return self.view.buffered_token(cid)

    def _drop_copy(self, sub: Submitted) -> None:
        """``sub`` is no longer a copy, if it was one (staged, taken, or
        stored: a copy sent again that now takes the buffered op's place)."""
        key = (sub.cid, sub.token_hash)
        if (
            key in self.view.batch.copies
            or key in self._copy_keys
            or sub.token_hash in self.view.stored_copies(sub.cid)
        ):
            self.view.batch.drop_copy(*key)

    def _leave_buffer(self, index: int | None, sub: Submitted) -> None:
        """A rejected op leaves the buffer. If it is the op buffered under its
        CID, the CID's copies are tried next; a request's op that is another
        token of that CID (a forged copy, say) does not take the waiting one
        out with it."""
        batch, cid = self.view.batch, sub.cid
        if self._holder(cid) == sub.token:
            batch.waiting.pop(cid, None)
            batch.resolved_cids.add(cid)
            self._checked_holders.discard(cid)
            self._promote.add(cid)
        else:
            self._drop_copy(sub)

    async def _take_copies(self) -> list[tuple[int | None, Submitted]]:
        """The copies of the CIDs whose buffered op was rejected, or woken
        and parked again, stored and staged in this session, to be tried as
        the buffer's op (the store gives each stored copy once a session; a
        staged one is kept again only by failing to take the CID's place). A
        copy a request of this session brought answers that request's line."""
        cids, self._promote = self._promote, set()
        batch = self.view.batch
        stored = await self.view.session.take_copies(cids)
        # not a stored copy this session dropped (one that took its CID's place)
        found = {(p.cid, h): p for h, p in stored if (p.cid, h) not in batch.copies_gone}
        self._stored_copies_taken.update(found)
        found.update({key: p for key, p in batch.copies.items() if key[0] in cids})
        out: list[tuple[int | None, Submitted]] = []
        for key, copy in found.items():
            if copy.jws_token == self._holder(key[0]):
                continue  # it holds the CID now, and is tried as such
            self._copy_keys.add(key)
            prepared = prepare(copy.jws_token)
            if isinstance(prepared, Submitted):
                out.append((self._copy_lines.get(key), prepared))
            else:  # kept copies decoded when they arrived: only a defence
                batch.drop_copy(*key)
        return out

    def _unpark(self, sub: Submitted) -> None:
        parked = self._parked.get(sub.cid)
        if parked is not None and parked[1].token == sub.token:
            del self._parked[sub.cid]
            self._waiting[parked[2]].discard(sub.cid)

    def _park(self, index: int | None, sub: Submitted, key: str) -> None:
        previous = self._parked.get(sub.cid)
        if previous is not None:
            self._waiting[previous[2]].discard(sub.cid)
            if index is None:  # keep answering the request line that submitted it
                index = previous[0]
        self._parked[sub.cid] = (index, sub, key)
        self._waiting[key].add(sub.cid)

    async def _wake(self, keys: list[str]) -> list[tuple[int | None, Submitted]]:
        """The ops waiting for ``keys``, and, transitively, those waiting for
        what these would satisfy: a whole cascade is attempted in one round
        (in causal order) rather than one round per level. An op woken too
        early just waits again."""
        next_round: dict[str, tuple[int | None, Submitted]] = {}
        seen: set[str] = set()
        frontier = [key for key in dict.fromkeys(keys)]
        while frontier:
            seen.update(frontier)
            found: list[Submitted] = []
            for key in frontier:
                for cid in self._waiting.pop(key, ()):
                    index, sub, _ = self._parked.pop(cid)
                    next_round[cid] = (index, sub)
                    found.append(sub)
            found.extend(await self._take_stored(frontier, next_round))
            frontier = [key for sub in found for key in wake_keys(sub) if key not in seen]
            frontier = list(dict.fromkeys(frontier))
        self._woken.update(next_round)
        return list(next_round.values())

    async def _take_stored(
        self, keys: list[str], next_round: dict[str, tuple[int | None, Submitted]]
    ) -> list[Submitted]:
        keys = [key for key in keys if key not in self._followed]
        if not self._buffered_waiting or not keys:
            return []
        self._followed.update(keys)
        found: list[Submitted] = []
        for pending in await self.view.session.take_waiting(keys):
            cid = pending.cid
            self._followed.add(depends_on_op(cid))
            self.view.learn_buffered(cid, pending.jws_token)
            # What this session learnt about an op is fresher than the buffer's
            # note: parked here, resolved here, or another token took its place
            # (the buffered one is then a copy, tried if that token fails).
            if cid in next_round or cid in self._parked or self._holder(cid) != pending.jws_token:
                continue
            cached = self._prepared.get(cid)
            hit = cached is not None and cached.token == pending.jws_token
            prepared = cached if hit else prepare(pending.jws_token)
            if isinstance(prepared, Submitted):
                next_round[cid] = (None, prepared)
                found.append(prepared)
        return found


def _signed_as_claimed(sub: Submitted) -> bool:
    """Its signature checked under a key of the DID its kid names, and that
    DID is the signer its payload names (a copy signed with another
    identity's key is not). An identity update names no signer in its
    payload: its kid's DID is checked against the chain when it sequences."""
    if sub.decoded.verified_key is None:
        return False
    did = sub.payload.get("did")
    return not isinstance(did, str) or kid_did(sub) == did


def _malformed_payload(sub: Submitted) -> Rejected | None:
    """The rejection of an op that would wait but whose payload does not
    parse as its kind's (a ``createdAt`` that is no timestamp, a field too
    long, ...): verified, whenever its dependency arrives, it can only be
    rejected so (``malformed``), so it is now rather than parked. Like the
    future guard, this also clears such ops from a buffer an older version
    filled."""
    try:
        check_typ_payload(sub.decoded)
    except ProtocolError as exc:
        return rejection_for(exc)
    return None


def _claimed_cid_holds(sub: Submitted) -> Rejected | None:
    """The rejection of an op whose header cid is not its payload's CID."""
    try:
        check_cid(sub.decoded)
    except ProtocolError as exc:
        return rejection_for(exc)
    return None


def _beyond_future_guard(sub: Submitted, now_ms: int) -> Rejected | None:
    """The rejection of an op that would wait but is dated beyond its kind's
    future guard (PROTOCOL.md "Future timestamp bound"): verified, whenever
    its dependency arrives, it can only be rejected so (the clock moves on,
    its createdAt does not), so it is now, with the verifier's reason and
    text, rather than answered waiting and parked. This also clears such ops
    from a buffer an older version filled (the restart's drain tries them)."""
    try:
        check_typ_not_future(sub.decoded, now_ms)
    except ProtocolError as exc:
        return rejection_for(exc)
    return None


def _needs(round_: Sequence[tuple[int | None, Submitted]]) -> Needs:
    needs = Needs()
    for _, sub in round_:
        payload = sub.payload
        needs.cids.add(sub.cid)
        needs.buffered.add(sub.cid)
        needs.token_hashes.add(sub.token_hash)
        signer = claimed_signer(sub.decoded, sub.cid)
        if signer is not None:
            needs.signers.add(signer)
        for field in ("previousOperationCID", "targetCID"):
            value = payload.get(field)
            if isinstance(value, str):
                needs.cids.add(value)
        did = kid_did(sub) if sub.kind == "identity-op" else payload.get("did")
        if isinstance(did, str):
            needs.dids.add(did)
            if sub.kind == "beacon":
                needs.beacon_dids.add(did)
            target = payload.get("targetCID")
            if sub.kind == "countersign" and isinstance(target, str):
                needs.pairs.add((target, did))
    return needs
