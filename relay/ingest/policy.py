"""The write gate: the operator's say on each verified op, before it commits.

Judges each op after verification (the op's chain rules, signature and
signer all hold), before it is staged for commit, with the op and its signer
(the DID whose key signed it). In order:

1. exempt signers pass (this relay's own DID and its operators' DIDs);
2. a banned signer is refused: ``banned``;
3. the deny lists (DIDs, kinds), then the allow lists when set: ``policy-denied``;
4. the operator's function (``--write-policy module:function``), if any:
   it returns ``None``/``True`` to accept, ``False`` or a reason (``str``)
   to refuse (``policy-denied``, the reason on the client's result line).

A request's ops the precheck verified are asked about before its session,
with no lock held (``ask_early``, ``relay.ingest.early``), so a slow function
holds up no other ingestion; the session uses such an answer only for an op
it shows the function exactly as asked (``preset_early``). So the function
may be asked about an op its session then rejects on a chain rule, parks, or
finds a duplicate (another request sequenced it first); steps 1-3 are still
the session's, and bans are judged by the store's as it reads them.

The function is bounded. The gate itself is synchronous (it runs inside the
sequencing session), so for an op whose function decision is not known yet
it raises ``Held``; the sequencer collects a round's held ops, awaits
``decide`` once for all of them (each call in a worker thread, or awaited if
the function is async, all concurrently) and attempts them again. A call
that raises (anything, ``SystemExit`` included), returns anything else, or
is not done within ``timeout_s`` refuses its op with ``policy-error``. A
round waits at most ``timeout_s``, and a whole sequencing session at most
``SESSION_BUDGET_ROUNDS`` times that: a chain whose every op waits for its
parent's decision cannot hold the sequencer a round per op. The relay's
retry of kept ops asks the function outside any session instead (``ask``)
and hands the session its answers (``preset``), so a hanging policy holds
no session up. An early call that is late, or not made, gives no answer:
the session asks again, as it would have (early calls have threads of their
own, so a session's never queue behind them). A call past its timeout keeps
its thread (Python cannot stop one); when hung calls hold every thread of a
pool, new calls go to a fresh pool, and once
``MAX_STUCK_CALLS`` hang at once (an async call that ignores its
cancellation hangs too), ops are refused without a call until some return.
Every refusal is transient (not recorded): the same op may pass once the
ban or policy changes, or the policy answers in time.

Bans are judged by the store's bans as the sequencing session read them
(``stored``: the session holds the sequencing lock, so a ban stored before
it began is there, whichever worker stored it; an admin's purge runs under
that lock after storing its ban, so nothing of the banned DID lands after
it). A DID the session did not read is looked up through ``banned``, a
cache kept fresh by the engine. Not done here: a policy that holds the GIL
in a busy loop cannot be bounded.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass
from types import MappingProxyType
from typing import Any

from relay.protocol import (
    DecodedJws,
    ProtocolError,
    decode_jws,
    did_from_genesis_cid,
    split_kid,
)
from relay.rules.outcomes import Rejected, RejectReason
from stores.base import OperationRecord

log = logging.getLogger("dfos_relay.policy")

DEFAULT_POLICY_TIMEOUT_S = 1.0
# buffered ops the policy failed on are tried again after this, doubling up
# to the most while it keeps failing (``relay.ingest.retry``)
DEFAULT_POLICY_RETRY_FIRST_S = 1.0
DEFAULT_POLICY_RETRY_MAX_S = 60.0
# ... and rejected (``policy-error``, not recorded) once they have waited for
# the policy this long: a policy that never answers must not keep them for good
DEFAULT_POLICY_RETRY_GIVE_UP_S = 24 * 3600.0
POLICY_THREADS = 4  # per pool of a session's calls; a pool whose threads all hang is replaced
# early calls serve every request waiting to be sequenced at once: a blocking
# function of 100 ms answers 160 ops/s on these, where 4 threads gave 40
EARLY_POLICY_THREADS = 16
MAX_STUCK_CALLS = 32  # calls past their timeout still running, in all pools
SESSION_BUDGET_ROUNDS = 2  # a session waits on the policy at most this many timeouts
MAX_POLICY_TEXT = 500  # characters of a policy's reason (or error) a result line carries
OP_KINDS = ("identity-op", "content-op", "beacon", "artifact", "countersign")


@dataclass(frozen=True, slots=True)
class VerifiedOp:
    """What a write policy is shown: a verified op about to be committed."""

    cid: str
    kind: str  # identity-op, content-op, beacon, artifact, countersign
    chain_id: str  # DID, contentId, or the countersigned CID
    signer: str
    created_at_ms: int
    jws_token: str
    payload: Mapping[str, Any]


# ``policy(op, signer)`` -> None | bool | str, or an awaitable of one
PolicyFunction = Callable[[VerifiedOp, str], object]
BanLookup = Callable[[str], str | None]  # the ban's reason, None if not banned
# bans read from the store by a sequencing session: DID -> reason (None: not banned)
StoredBans = Mapping[str, str | None]
NO_STORED_BANS: StoredBans = MappingProxyType({})
# the function's answers asked before a session (``ask_early``): (CID, token)
# -> (the record it was shown, its decision); see ``relay.ingest.early``
EarlyDecisions = Mapping[tuple[str, str], tuple[OperationRecord, Rejected | None]]


@dataclass(frozen=True, slots=True)
class WritePolicy:
    function: PolicyFunction | None = None
    name: str = ""  # the module:function it was loaded from, for messages
    timeout_s: float = DEFAULT_POLICY_TIMEOUT_S
    allow_dids: frozenset[str] = frozenset()
    deny_dids: frozenset[str] = frozenset()
    allow_kinds: frozenset[str] = frozenset()
    deny_kinds: frozenset[str] = frozenset()
    _: KW_ONLY
    # buffered ops it failed on are tried again (``relay.ingest.retry``)
    retry_first_s: float = DEFAULT_POLICY_RETRY_FIRST_S
    retry_max_s: float = DEFAULT_POLICY_RETRY_MAX_S
    retry_give_up_s: float = DEFAULT_POLICY_RETRY_GIVE_UP_S


class Held(Exception):
    """The op waits for its policy decision (raised before anything is staged)."""

    def __init__(self, op: OperationRecord) -> None:
        super().__init__(op.cid)
        self.op = op


class Refused(Exception):
    """The gate refuses the op (raised before anything is staged)."""

    def __init__(self, rejected: Rejected) -> None:
        super().__init__(rejected.detail)
        self.rejected = rejected


def load_policy_function(spec: str) -> PolicyFunction:
    """Import ``module:function``; ValueError (one line) when that fails."""
    module_name, colon, attr = spec.strip().partition(":")
    if not colon or not module_name or not attr:
        raise ValueError(f"expected module:function, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # any import-time failure of operator code, sys.exit() too
        raise ValueError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    function = getattr(module, attr, None)
    if function is None:
        raise ValueError(f"module {module_name!r} has no attribute {attr!r}")
    if not callable(function):
        raise ValueError(f"{spec!r} is not callable")
    return function  # type: ignore[no-any-return]


def signer_of_token(cid: str, token: str) -> str | None:
    """The DID a (not yet verified) token claims as its signer: the payload's
    ``did``, else the ``kid``'s DID, else an identity genesis's own DID."""
    try:
        return claimed_signer(decode_jws(token), cid)
    except ProtocolError:
        return None


def claimed_signer(decoded: DecodedJws, cid: str) -> str | None:
    """``signer_of_token`` of a decoded token."""
    try:
        did = decoded.payload.get("did")
        if isinstance(did, str):
            return did
        kid_did = split_kid(decoded.kid)[0] if decoded.kid else None
        return kid_did or did_from_genesis_cid(cid)
    except ProtocolError:
        return None


def _denied(text: str) -> Rejected:
    return Rejected(RejectReason.POLICY_DENIED, f"policy: {text}")


def _error(text: str) -> Rejected:
    return Rejected(RejectReason.POLICY_ERROR, f"policy error: {text}")


class WriteGate:
    def __init__(
        self,
        policy: WritePolicy | None = None,
        banned: BanLookup | None = None,
        exempt: Collection[str] = (),
    ) -> None:
        self.policy = policy or WritePolicy()
        self._banned = banned
        self._exempt = set(exempt)
        # decisions of the function for this session's ops; see ``forget``
        self._decisions: dict[str, Rejected | None] = {}
        # answers asked before this session (``preset_early``); see ``forget``
        self._early: dict[tuple[str, str], tuple[OperationRecord, Rejected | None]] = {}
        self._waited_s = 0.0  # this session's wait on the function
        self._threads = _PolicyThreads(POLICY_THREADS)
        # early calls (``ask_early``) have threads of their own: a session's
        # calls never queue behind other requests' early ones
        self._early_threads = _PolicyThreads(EARLY_POLICY_THREADS, "write-policy-early")
        # calls cancelled at their timeout and not ended yet: an async policy
        # may ignore its cancellation, and each would hold a task for good
        self._lingering: set[asyncio.Future[object]] = set()

    def exempt(self, did: str) -> None:
        self._exempt.add(did)

    def screen(self, op: OperationRecord, stored: StoredBans = NO_STORED_BANS) -> None:
        """Pass, or raise ``Refused`` / ``Held``. Synchronous and cheap."""
        signer = op.author_did
        if signer in self._exempt:
            return
        banned = self.banned(signer, stored)
        if banned is not None:
            raise Refused(banned)
        refused = self._listed(op.kind, signer)
        if refused is not None:
            raise Refused(refused)
        if self.policy.function is None:
            return
        if op.cid in self._decisions:
            decided = self._decisions[op.cid]
        else:
            early = self._early.get((op.cid, op.jws_token))
            if early is None or not _shown_alike(early[0], op):
                raise Held(op)
            decided = early[1]
        if decided is not None:
            raise Refused(decided)

    def banned(self, signer: str, stored: StoredBans = NO_STORED_BANS) -> Rejected | None:
        """The refusal of ``signer``'s ops when it is banned (and not exempt):
        by ``stored`` (the store's bans the session read) if it has read
        ``signer``'s, else by the cache. Also asked of an op that cannot be
        verified yet, whose signer is only claimed: a banned DID's op is
        refused rather than left waiting."""
        if signer in self._exempt:
            return None
        if signer in stored:
            reason = stored[signer]
        elif self._banned is not None:
            reason = self._banned(signer)
        else:
            return None
        if reason is None:
            return None
        why = f" ({reason})" if reason else ""
        return Rejected(RejectReason.BANNED, f"banned: {signer} is banned on this relay{why}")

    def _listed(self, kind: str, signer: str) -> Rejected | None:
        p = self.policy
        if signer in p.deny_dids:
            return _denied(f"signer {signer} is on this relay's deny list")
        if kind in p.deny_kinds:
            return _denied(f"{kind} operations are denied on this relay")
        if p.allow_dids and signer not in p.allow_dids:
            return _denied(f"signer {signer} is not on this relay's allow list")
        if p.allow_kinds and kind not in p.allow_kinds:
            return _denied(f"{kind} operations are not allowed on this relay")
        return None

    async def decide(self, held: Sequence[tuple[OperationRecord, Mapping[str, Any]]]) -> None:
        """Call the function for every held op, concurrently, bounded by the timeout."""
        function = self.policy.function
        if function is None or not held:
            return
        undecided = [(op, payload) for op, payload in held if op.cid not in self._decisions]
        if not undecided:
            return
        timeout = min(self.policy.timeout_s, self._budget_s())
        session = self.policy.timeout_s * SESSION_BUDGET_ROUNDS
        spent = _error(f"no decision within this session's {session:g}s for the policy")
        if timeout <= 0:
            self._decisions.update((op.cid, spent) for op, _ in undecided)
            return
        started = time.monotonic()
        cut = timeout < self.policy.timeout_s  # by the session's budget
        decided = await self._ask(function, undecided, timeout, spent if cut else None)
        self._waited_s += time.monotonic() - started
        self._decisions.update(decided)

    async def ask(
        self, ops: Sequence[tuple[OperationRecord, Mapping[str, Any]]]
    ) -> dict[str, Rejected | None]:
        """The function's decisions on ``ops``, asked outside any sequencing
        session (the relay's retry of kept ops, ``Ingestor.retry_kept``):
        concurrently, bounded by the timeout, so a hanging policy holds no
        session. A session given them (``preset``) asks nothing more of them.
        Nothing of this session's own decisions is touched."""
        function = self.policy.function
        if function is None or not ops:
            return {}
        return await self._ask(function, ops, self.policy.timeout_s, None)

    async def ask_early(
        self, ops: Sequence[tuple[OperationRecord, Mapping[str, Any]]]
    ) -> dict[tuple[str, str], tuple[OperationRecord, Rejected | None]]:
        """The function's decisions on a request's ``ops`` as its session is
        expected to show them (``relay.ingest.early``), asked before that
        session with no lock held: concurrently, bounded by the timeout, as
        ``ask``. Not asked: ops of exempt signers, of signers the cache
        knows as banned, or refused by the lists (the session judges them as
        ever, bans by the store's under the lock)."""
        asked = [
            (op, payload)
            for op, payload in ops
            if op.author_did not in self._exempt
            and self.banned(op.author_did) is None
            and self._listed(op.kind, op.author_did) is None
        ]
        function = self.policy.function
        if function is None or not asked:
            return {}
        by_cid: dict[str, tuple[OperationRecord, Mapping[str, Any]]] = {}
        for op, payload in asked:  # one call per CID: another token of it is asked in session
            by_cid.setdefault(op.cid, (op, payload))
        ops = list(by_cid.values())
        timeout = self.policy.timeout_s
        decided = await self._ask(function, ops, timeout, None, self._early_threads, early=True)
        return {(op.cid, op.jws_token): (op, decided[op.cid]) for op, _ in ops if op.cid in decided}

    def preset_early(self, decisions: EarlyDecisions) -> None:
        """Decisions ``ask_early`` made, for the session about to begin (held
        by its sequencing lock): ``screen`` uses one only for an op shown as
        it was asked about, and ``forget`` drops them at the session's end."""
        self._early.update(decisions)

    def preset(self, decisions: Mapping[str, Rejected | None]) -> None:
        """Decisions ``ask`` made, for the session about to begin (held by
        its sequencing lock): ``forget`` drops them with its own at its end."""
        self._decisions.update(decisions)

    async def _ask(
        self,
        function: PolicyFunction,
        ops: Sequence[tuple[OperationRecord, Mapping[str, Any]]],
        timeout: float,
        spent: Rejected | None,
        threads: _PolicyThreads | None = None,
        *,
        early: bool = False,
    ) -> dict[str, Rejected | None]:
        """One call per op, all concurrently, waited on at most ``timeout``:
        a call still running then is refused (``spent`` if given: the
        session's budget cut it, not the policy's timeout). ``early``: only
        the function's answers, none for a call late, cancelled or not made
        (too many hang), so that the session asks again, as it would have."""
        pool = threads or self._threads
        calls = {
            op.cid: asyncio.ensure_future(self._call(function, _verified(op, payload), pool))
            for op, payload in ops
        }
        try:
            _, late = await asyncio.wait(calls.values(), timeout=timeout)
        except asyncio.CancelledError:  # the request is gone: so are its calls
            for call in calls.values():
                self._linger(call)
            raise
        decided: dict[str, Rejected | None] = {}
        for cid, call in calls.items():
            if call in late:
                self._linger(call)
                log.warning("write policy %s timed out on %s", self.policy.name, cid)
                if not early:
                    decided[cid] = spent or _error(f"no decision within {timeout:g}s")
            elif call.cancelled():
                if not early:
                    decided[cid] = _error("the call was cancelled")
            elif early and isinstance(call.result(), _NotCalled):
                continue
            else:
                decided[cid] = _interpret(self.policy.name, cid, call.result())
        return decided

    def _linger(self, call: asyncio.Future[object]) -> None:
        """Cancel ``call``, and count it as lingering until it ends."""
        if call.done():
            return
        call.cancel()
        self._lingering.add(call)
        call.add_done_callback(self._lingering.discard)

    def _budget_s(self) -> float:
        return self.policy.timeout_s * SESSION_BUDGET_ROUNDS - self._waited_s

    async def _call(
        self, function: PolicyFunction, op: VerifiedOp, threads: _PolicyThreads
    ) -> object:
        """The function's answer, or ``_Raised`` with whatever it raised
        (``SystemExit`` included: operator code must not end the relay)."""
        stuck = self._threads.stuck + self._early_threads.stuck + len(self._lingering)
        if stuck >= MAX_STUCK_CALLS:
            return _NotCalled(RuntimeError(f"{stuck} earlier calls still hang"))
        try:
            result: object
            if inspect.iscoroutinefunction(function):
                result = function(op, op.signer)
            else:
                result = await threads.run(function, op)
            if inspect.isawaitable(result):
                result = await result
            return result
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # our timeout, or the relay stopping
            return _Raised(asyncio.CancelledError("cancelled inside the policy"))
        except BaseException as exc:  # any failure of operator code is its op's
            return _Raised(exc)

    def forget(self) -> None:
        """End of a sequencing session: decisions are not kept across sessions."""
        self._decisions.clear()
        self._early.clear()
        self._waited_s = 0.0

    def close(self) -> None:
        """Stop the worker threads (a hung call is abandoned, not joined)."""
        self._threads.close()
        self._early_threads.close()


@dataclass(frozen=True, slots=True)
class _Raised:
    """What a policy call raised, carried as its answer."""

    exc: BaseException


@dataclass(frozen=True, slots=True)
class _NotCalled(_Raised):
    """The function was not called (too many earlier calls hang)."""


class _PolicyThreads:
    """Worker threads for a synchronous policy function. A call past its
    timeout cannot be stopped, so its thread is written off until it returns;
    when such calls hold every thread of the pool, a fresh pool takes the new
    calls (``stuck`` counts them, in all pools, for ``MAX_STUCK_CALLS``)."""

    def __init__(self, size: int, name: str = "write-policy") -> None:
        self._size = size
        self._name = name
        self._lock = threading.Lock()  # stuck calls return on their own threads
        self._pool: ThreadPoolExecutor | None = None
        self._stuck_in_pool = 0
        self.stuck = 0

    async def run(self, function: PolicyFunction, op: VerifiedOp) -> object:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._size, self._name)
                self._stuck_in_pool = 0
            pool = self._pool
        future = pool.submit(_invoke, function, op)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            self._abandon(future, pool)
            raise

    def _abandon(self, future: Future[object], pool: ThreadPoolExecutor) -> None:
        if future.cancel():
            return  # it had not started: no thread is held
        with self._lock:
            if future.done():
                return
            self.stuck += 1
            if pool is self._pool:
                self._stuck_in_pool += 1
                if self._stuck_in_pool >= self._size:
                    self._pool = None  # every thread hangs: new calls get a new pool
                    pool.shutdown(wait=False)
        future.add_done_callback(lambda _: self._returned(pool))

    def _returned(self, pool: ThreadPoolExecutor) -> None:
        with self._lock:
            self.stuck -= 1
            if pool is self._pool:
                self._stuck_in_pool -= 1

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _invoke(function: PolicyFunction, op: VerifiedOp) -> object:
    try:
        return function(op, op.signer)
    except BaseException as exc:  # SystemExit too: it must not reach the event loop
        return _Raised(exc)


def _shown_alike(asked: OperationRecord, op: OperationRecord) -> bool:
    """``op`` shows the function what ``asked`` did (its payload is its token's)."""
    return (
        asked.cid == op.cid
        and asked.jws_token == op.jws_token
        and asked.kind == op.kind
        and asked.chain_id == op.chain_id
        and asked.author_did == op.author_did
        and asked.created_at_ms == op.created_at_ms
    )


def _verified(op: OperationRecord, payload: Mapping[str, Any]) -> VerifiedOp:
    # a deep copy: the op is staged from ``payload`` once judged, and a policy
    # changing a nested list (keys, say) must not change what is committed
    return VerifiedOp(
        op.cid, op.kind, op.chain_id, op.author_did, op.created_at_ms, op.jws_token,
        MappingProxyType(copy.deepcopy(dict(payload))),
    )  # fmt: skip


def _interpret(name: str, cid: str, result: object) -> Rejected | None:
    """The decision ``result`` says. Operator code's objects may raise when
    read (an exception's ``__str__``, a ``str`` subclass's ``__bool__``), and
    a failure here would fail the whole session: they are read defensively."""
    if isinstance(result, _Raised):
        exc = result.exc
        log.warning("write policy %s raised on %s: %r", name, cid, exc)
        try:
            said = f"{type(exc).__name__}: {exc}"
        except BaseException:  # its __str__ raised too
            said = type(exc).__name__
        return _error(_said(said))
    if result is None or result is True:
        return None
    if result is False:
        return _denied("refused by this relay's write policy")
    if isinstance(result, str):
        return _denied(_said(str.__str__(result)) or "refused by this relay's write policy")
    return _error(f"the policy returned {type(result).__name__}, not None, a bool or a str")


def _said(text: str) -> str:
    """Policy text as every result line and stored note can carry it: at most
    ``MAX_POLICY_TEXT`` characters of UTF-8 text without NUL."""
    cut = text[:MAX_POLICY_TEXT] + ("…" if len(text) > MAX_POLICY_TEXT else "")
    return cut.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
