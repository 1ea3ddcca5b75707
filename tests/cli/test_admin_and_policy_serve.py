"""``dfos-relay serve`` with operators and a write policy, as a subprocess:
a bad ``--write-policy`` is a one-line start-up error; a good one, the
deny lists and a ban made through ``/admin/`` with an admin token (aud =
``<relay DID>#admin``; the operator's content-plane token is refused) all
reach the result lines, and the audit lines are in the relay's log."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from relay.admin import admin_audience
from relay.protocol import create_auth_token
from relay.testing.workload import WorkloadBuilder

from .conftest import DFOS_RELAY, RelayProcess, clean_env

ROOT = Path(__file__).resolve().parents[2]  # tests.admin.policies imports from here


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ("no_such_module_here:policy", "cannot import 'no_such_module_here'"),
        ("tests.admin.policies:nope", "has no attribute 'nope'"),
        ("tests.admin.policies:not_callable", "is not callable"),
        ("tests.admin.policies", "expected module:function"),
    ],
    ids=["no-module", "no-function", "not-callable", "no-colon"],
)
def test_a_bad_write_policy_is_one_line_at_start_up(spec: str, text: str) -> None:
    done = subprocess.run(
        [DFOS_RELAY, "serve", "--store", "memory://", "--write-policy", spec],
        env=clean_env({"PYTHONPATH": str(ROOT)}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("dfos-relay serve: error: --write-policy: ")
    assert text in done.stderr


@pytest.mark.parametrize(
    ("module", "text"),
    [
        ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
        ("raise KeyboardInterrupt\n", "KeyboardInterrupt"),
        ("class Odd(BaseException):\n    pass\nraise Odd('odd')\n", "Odd: odd"),
    ],
    ids=["sys-exit", "keyboard-interrupt", "base-exception"],
)
def test_a_policy_module_that_ends_its_import_is_one_line_at_start_up(
    tmp_path: Path, module: str, text: str
) -> None:
    """Whatever its import raises, the relay says so in one line (exit 2)."""
    (tmp_path / "ending_policy.py").write_text(module)
    done = subprocess.run(
        [DFOS_RELAY, "serve", "--store", "memory://", "--write-policy", "ending_policy:decide"],
        env=clean_env({"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("dfos-relay serve: error: --write-policy: cannot import")
    assert text in done.stderr


def test_operators_policy_and_lists_through_the_real_command(tmp_path: Path) -> None:
    b = WorkloadBuilder(seed=3, start_ms=time.time_ns() // 1_000_000 - 3_600_000)
    operator, alice, bob = b.identity(), b.identity(), b.identity()
    identities = list(b.tokens)
    relay = RelayProcess(
        [
            "--store", f"sqlite:///{tmp_path}/relay.db", "--admin-did", operator.did,
            "--write-policy", "tests.admin.policies:refuse_beacons",
            "--write-policy-timeout", "0.5", "--deny-kind", "artifact",
        ],
        env={"PYTHONPATH": str(ROOT), "DFOS_RELAY_LOG_LEVEL": "info"},
    )  # fmt: skip
    try:
        with httpx.Client(base_url=relay.url, timeout=30) as http:

            def post(tokens: list[str]) -> list[dict[str, object]]:
                response = http.post("/operations", json={"operations": tokens})
                assert response.status_code == 200
                return list(response.json()["results"])

            assert {r["status"] for r in post(identities)} == {"new"}
            relay_did = http.get("/.well-known/dfos-relay").json()["did"]
            now = int(time.time())
            token = create_auth_token(
                operator.keypair,
                operator.kid,
                operator.did,
                admin_audience(relay_did),
                now - 5,
                now + 60,
            )
            content_token = create_auth_token(
                operator.keypair, operator.kid, operator.did, relay_did, now - 5, now + 60
            )
            refused = http.put(
                f"/admin/bans/{alice.did}",
                json={"reason": "spam"},
                headers={"Authorization": f"Bearer {content_token}"},
            )
            assert refused.status_code == 401, refused.text
            assert "not an admin token" in refused.json()["error"]
            banned = http.put(
                f"/admin/bans/{alice.did}",
                json={"reason": "spam"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert banned.status_code == 200, banned.text
            b.content_create(alice)
            b.beacon(bob)
            b.artifact(bob)
            b.content_create(bob)
            results = post(b.tokens[-4:])
            assert [r.get("reason") for r in results] == [
                "banned", "policy-denied", "policy-denied", None,
            ]  # fmt: skip
            assert results[1]["error"] == "policy: no beacons here"
            assert results[3]["status"] == "new"
    finally:
        code, output = relay.stop()
    assert code == 0
    audits = [json.loads(line) for line in output.splitlines() if '"audit": true' in line]
    assert [(a["action"], a["admin"], a["outcome"]) for a in audits] == [
        ("authenticate", operator.did, "refused"),
        ("ban", operator.did, "ok"),
    ]
