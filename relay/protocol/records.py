"""A faster constructor for the frozen records built once or more per op.

Role: a frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__``, about twice the cost of setting the slot directly,
and the ingest path builds a dozen such records per operation (decoded
tokens, parsed payloads, states, store records, results). ``quick_init``
gives a frozen, slotted dataclass an ``__init__`` that writes its slots
through their descriptors.

Invariants: the class stays what it was (same signature, defaults, equality,
hash and repr; assignment after construction still raises
``FrozenInstanceError``); only classes without ``__post_init__``, default
factories or keyword-only fields are accepted, as the plain signature below
could not express them.
"""

from __future__ import annotations

from dataclasses import MISSING, fields, is_dataclass
from typing import TypeVar

__all__ = ["quick_init"]

_T = TypeVar("_T")


def quick_init(cls: type[_T]) -> type[_T]:
    """Replace ``cls.__init__`` by one that sets the slots directly (see module)."""
    params = getattr(cls, "__dataclass_params__", None)
    if not is_dataclass(cls) or params is None or not params.frozen:
        raise TypeError(f"{cls.__name__} is not a frozen dataclass")
    if "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} must be slotted and have no __post_init__")
    namespace: dict[str, object] = {}
    signature, body = [], []
    for f in fields(cls):
        if not f.init or f.kw_only or f.default_factory is not MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: only plain positional fields")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is MISSING:
            signature.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            signature.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(signature)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)  # as dataclasses itself builds __init__
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"  # type: ignore[attr-defined]
    init.__module__ = cls.__module__  # type: ignore[attr-defined]
    type.__setattr__(cls, "__init__", init)
    return cls
