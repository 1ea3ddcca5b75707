"""The credential memos stay bounded and keep the tokens in use (issue 17):
a stream of one-use credentials must not hold megabytes, and a delegate's
credential checked again and again must stay remembered."""

from __future__ import annotations

from relay.protocol import credentials, verify_credential_at_ms

from .content_helpers import RESOLVE, T0, write_credential


def test_memos_are_bounded_and_keep_the_most_recently_used_token() -> None:
    hot = write_credential()
    for i in range(credentials._READ_LIMIT + 20):
        verify_credential_at_ms(hot, RESOLVE, T0)
        # a distinct one-use credential each time (exp differs)
        verify_credential_at_ms(write_credential(exp=(T0 + 3_600_000) // 1000 + i), RESOLVE, T0)
    assert len(credentials._read) == credentials._READ_LIMIT
    assert len(credentials._verified) == credentials._VERIFIED_LIMIT
    assert hot in credentials._read and hot in credentials._verified
