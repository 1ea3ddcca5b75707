"""Reading text that comes from outside (requests, peers, settings) without
the surprises of Python's permissive parsers.

- ``ascii_decimal``: ``str.isdigit`` is true for "²" (which ``int`` refuses)
  and for "٣" (which ``int`` reads as 3); a number on our wire or command
  line is ASCII digits only.
- ``json_value``: ``json.loads`` raises ``RecursionError``, not ``ValueError``,
  for arrays nested deeper than its recursion limit; here anything that is
  not JSON is a ``ValueError`` (``UnicodeDecodeError`` is one already).
"""

from __future__ import annotations

import json


def ascii_decimal(text: str) -> int | None:
    """The value of ``text`` when it is a numeral of ASCII digits, else None."""
    return int(text) if text.isascii() and text.isdigit() else None


def json_value(data: str | bytes) -> object:
    """``data`` parsed as JSON; ``ValueError`` for anything that is not."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
