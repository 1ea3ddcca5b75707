"""Reading text that comes from outside (requests, peers, settings) without
the surprises of Python's permissive parsers.

- ``ascii_decimal``: ``str.isdigit`` is true for "²" (which ``int`` refuses)
  and for "٣" (which ``int`` reads as 3); a number on our wire or command
  line is ASCII digits only. And ``int`` raises ``ValueError`` for a
  numeral of more than 4300 digits (``sys.get_int_max_str_digits``), so a
  numeral that long (leading zeros aside) is not a number we read either.
- ``is_text``: JSON's ``"\\ud800"`` escape decodes to a lone surrogate, a
  ``str`` that no UTF-8 encoder takes (so no store, answer or CID either).
- ``json_value``: ``json.loads`` raises ``RecursionError``, not ``ValueError``,
  for arrays nested deeper than its recursion limit; here anything that is
  not JSON is a ``ValueError`` (``UnicodeDecodeError`` is one already).
"""

from __future__ import annotations

import json

# Far beyond any number of ours, and below the lowest digit limit Python lets
# a process set for ``int`` (640): nothing under it can raise.
MAX_NUMERAL_DIGITS = 600


def ascii_decimal(text: str) -> int | None:
    """The value of ``text`` when it is a numeral of ASCII digits (at most
    ``MAX_NUMERAL_DIGITS`` of them after leading zeros), else None."""
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0") or "0"
    if len(significant) > MAX_NUMERAL_DIGITS:
        return None
    return int(significant)


def is_text(text: str) -> bool:
    """``text`` is Unicode text: it holds no lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_value(data: str | bytes) -> object:
    """``data`` parsed as JSON; ``ValueError`` for anything that is not."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
