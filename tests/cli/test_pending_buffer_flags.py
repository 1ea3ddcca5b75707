"""``--max-pending`` and ``--max-copies-per-op`` (or their ``DFOS_RELAY_``
variables) bound the pending buffer of a relay run as ``dfos-relay serve``:
an op or copy beyond is answered ``buffer-full`` and not kept, and what was
kept is still sequenced when its dependency arrives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import pytest

from tests.support.waiting_ops import chain_with_a_gap, forged_signature

from .conftest import RelayProcess


def _post(client: httpx.Client, tokens: Sequence[str]) -> list[dict[str, Any]]:
    response = client.post("/operations", json={"operations": list(tokens)})
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def _reason(client: httpx.Client, token: str) -> str:
    [result] = _post(client, [token])
    assert result["status"] == "rejected", result
    return str(result["reason"])


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--max-pending", "1", "--store", "memory://"], {}),
        (["--store", "memory://"], {"DFOS_RELAY_MAX_PENDING": "1"}),
    ],
    ids=["flag", "environment"],
)
def test_max_pending_bounds_the_buffer(args: list[str], env: Mapping[str, str]) -> None:
    _, first_cid, (identity, genesis, update1, update2) = chain_with_a_gap(301)
    _, _, (identity_b, genesis_b, _, update2_b) = chain_with_a_gap(302)
    relay = RelayProcess(args, env=env)
    with relay.explained(), httpx.Client(base_url=relay.url, timeout=30) as client:
        _post(client, [identity, genesis, identity_b, genesis_b])
        assert _reason(client, update2) == "missing-previous"
        assert _reason(client, update2_b) == "buffer-full"  # one slot, taken
        assert [r["status"] for r in _post(client, [update1])] == ["new"]
        assert client.get(f"/operations/{first_cid}").json()["jwsToken"] == update2
        assert _reason(client, update2_b) == "missing-previous"  # the slot is free again
    relay.stop()


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--store", "memory://", "--max-copies-per-op", "0"], {}),
        (["--store", "memory://"], {"DFOS_RELAY_MAX_COPIES_PER_OP": "0"}),
    ],
    ids=["flag", "environment"],
)
def test_max_copies_per_op_bounds_the_copies_of_a_waiting_op(
    args: list[str], env: Mapping[str, str]
) -> None:
    _, waiting_cid, (identity, genesis, update1, update2) = chain_with_a_gap(303)
    relay = RelayProcess(args, env=env)
    with relay.explained(), httpx.Client(base_url=relay.url, timeout=30) as client:
        _post(client, [identity, genesis])
        assert _reason(client, update2) == "missing-previous"
        assert _reason(client, forged_signature(update2)) == "buffer-full"
        _post(client, [update1])
        assert client.get(f"/operations/{waiting_cid}").json()["jwsToken"] == update2
    relay.stop()
