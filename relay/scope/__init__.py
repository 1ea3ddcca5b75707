"""Scoped replication: a scope (identity DIDs and contentIds) and its
dependency closure, as the feed, ``/log`` and reconciliation serve it."""

from relay.scope.closure import EffectiveScope, ScopeReader, effective_scope
from relay.scope.guard import GuardReader, GuardSplit, Pulled, ScopeGuard
from relay.scope.model import MAX_SCOPE_MEMBERS, Scope, ScopeError, load_scope_file, parse_scope
from relay.scope.tracker import Admitted, ScopeTracker

__all__ = [
    "MAX_SCOPE_MEMBERS",
    "Admitted",
    "EffectiveScope",
    "GuardReader",
    "GuardSplit",
    "Pulled",
    "Scope",
    "ScopeError",
    "ScopeGuard",
    "ScopeReader",
    "ScopeTracker",
    "effective_scope",
    "load_scope_file",
    "parse_scope",
]
