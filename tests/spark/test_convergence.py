"""The convergence job over dumps of real relays (issue 6).

Relays are this project's relays over memory stores, in process, peered in
a full mesh; they converge by their own peering sync-in
(``relay.sync_from_peers()``, see ``relays.sync_until_stable``) and are
dumped by ``relay.dumplog``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark.convergence import run_convergence
from spark.dumps import load_dumps, parse_dump_args
from spark.replay import chain_heads, decode_entries
from spark.tokens import token_table

from .relays import Node, relays, sync_until_stable
from .scenarios import (
    append_line,
    entry_line,
    story,
    tamper_signature,
    wrong_cid_artifact,
)

pytestmark = pytest.mark.spark


def converge(spark: Any, dumps: list[str], *flags: str, out: Path) -> tuple[int, dict[str, Any]]:
    report_path = out / "report.json"
    code = run_convergence([*flags, "--quiet", "--out", str(report_path), *dumps], spark=spark)
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return code, report


async def all_heads(nodes: list[Node]) -> dict[tuple[str, str], str | None]:
    heads: dict[tuple[str, str], str | None] = {}
    for node in nodes:
        for e in await node.log_tokens():
            if e["kind"] in ("identity-op", "content-op"):
                heads[(node.name, e["chainId"])] = await node.head(e["kind"], e["chainId"])
    return heads


@dataclass
class Converged:
    dumps: list[str]
    heads: dict[tuple[str, str], str | None]


@pytest.fixture(scope="module")
def converged(tmp_path_factory: pytest.TempPathFactory) -> Converged:
    """Three relays fed different parts of a workload, then synced."""
    out = tmp_path_factory.mktemp("converged")
    s = story(3, seed=11)
    tokens = s.take()

    async def build() -> Converged:
        async with relays(3) as nodes:
            for i, node in enumerate(nodes):
                await node.post(tokens[i::3])
            await sync_until_stable(nodes)
            dumps = [str(await nodes[0].dump(out)), str(await nodes[1].dump(out, ".jsonl.gz"))]
            dumps.append(f"third={await nodes[2].dump(out)}")
            return Converged(dumps, await all_heads(nodes))

    return asyncio.run(build())


def test_relays_converged_by_peering_are_reported_converged(
    spark: Any, converged: Converged, tmp_path: Path
) -> None:
    code, report = converge(spark, converged.dumps, "--verify", out=tmp_path)
    assert code == 0
    assert report["converged"] and report["verified"]
    assert report["chains"]["divergent"] == 0
    assert report["chains"]["agreed"] == report["chains"]["total"] > 0
    assert [r["name"] for r in report["relays"]] == ["r0", "r1", "third"]
    assert len({r["ops"] for r in report["relays"]}) == 1


def test_job_heads_equal_the_heads_relays_serve(spark: Any, converged: Converged) -> None:
    specs = parse_dump_args(converged.dumps)
    relays = [s.relay for s in specs]
    table = token_table(decode_entries(load_dumps(spark, specs)), relays, 4)
    rows = chain_heads(table, relays).collect()
    computed = {(r["relay"].replace("third", "r2"), r["chainId"]): r["head"] for r in rows}
    assert computed == converged.heads
    assert all(head is not None for head in computed.values())


@pytest.fixture(scope="module")
def diverged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three synced relays, then faults injected into single relays."""
    out = tmp_path_factory.mktemp("diverged")
    s = story(2, seed=12)
    b, (alice, bob), (chain_a, chain_b) = s.builder, s.actors[:2], s.chains
    base = s.take()
    late_a = b.content_update(chain_a)  # only r0 and r2: r1 lacks it
    lacked = s.take()
    fork_b = b.content_update(chain_b, parent=chain_b.ops[1], created_ms=b.tick() + 10_000)
    fork = s.take()  # only r2: its head of chain_b differs
    target = b.artifact(bob)
    witness = b.countersign(alice, target)
    witnessed = s.take()  # only r0: countersign whose target only r0 has
    liar_cid, liar_token = wrong_cid_artifact(b, bob)

    async def build() -> list[Path]:
        async with relays(3) as nodes:
            await nodes[0].post(base)
            await sync_until_stable(nodes)
            # no sync from here on: each fault stays on the relays it was posted to
            await nodes[0].post(lacked)
            await nodes[2].post(lacked)
            await nodes[2].post(fork)
            await nodes[0].post(witnessed)
            return [await node.dump(out) for node in nodes]

    paths = asyncio.run(build())
    tamper_signature(paths[0], chain_a.ops[2][0])
    append_line(paths[1], entry_line(liar_cid, liar_token, "artifact", bob.did))
    return {
        "dumps": [str(p) for p in paths],
        "chain_a": chain_a.content_id,
        "late_a": late_a,
        "chain_b": chain_b.content_id,
        "fork_b": fork_b,
        "target": target,
        "witness": witness,
        "tampered": chain_a.ops[2][0],
        "liar": liar_cid,
    }


def test_injected_divergence_is_named(spark: Any, diverged: dict[str, Any], tmp_path: Path) -> None:
    code, report = converge(spark, diverged["dumps"], out=tmp_path)
    assert code == 1 and not report["converged"]
    chains = {c["chainId"]: c for c in report["divergentChains"]}
    assert set(chains) == {diverged["chain_a"], diverged["chain_b"]}
    missing = chains[diverged["chain_a"]]
    assert missing["reasons"] == ["heads-differ", "ops-differ"]
    assert missing["lacking"] == {"r1": [diverged["late_a"]]}
    assert missing["heads"]["r0"] == missing["heads"]["r2"] == diverged["late_a"]
    forked = chains[diverged["chain_b"]]
    assert forked["heads"]["r2"] == diverged["fork_b"] != forked["heads"]["r0"]
    assert forked["lacking"] == {"r0": [diverged["fork_b"]], "r1": [diverged["fork_b"]]}
    partial = {op["cid"]: op for op in report["partialOps"]["ops"]}
    assert partial[diverged["late_a"]]["lackedBy"] == ["r1"]
    assert partial[diverged["liar"]]["heldBy"] == ["r1"]
    [cs] = report["countersignsWithPartialTarget"]["ops"]
    assert (cs["cid"], cs["targetCid"], cs["targetHeldBy"]) == (
        diverged["witness"],
        diverged["target"],
        ["r0"],
    )
    [conflict] = report["tokenConflicts"]["cids"]
    assert conflict["cid"] == diverged["tampered"]
    assert "invalidOps" not in report


def test_verify_names_tampered_tokens_and_who_served_them(
    spark: Any, diverged: dict[str, Any], tmp_path: Path
) -> None:
    code, report = converge(spark, diverged["dumps"], "--verify", out=tmp_path)
    assert code == 1 and report["verified"] is False
    invalid = {op["cid"]: op for op in report["invalidOps"]["ops"]}
    assert set(invalid) == {diverged["tampered"], diverged["liar"]}
    assert invalid[diverged["tampered"]]["servedBy"] == ["r0"]
    assert invalid[diverged["tampered"]]["reason"].startswith("SignatureError")
    assert invalid[diverged["liar"]]["servedBy"] == ["r1"]
    assert invalid[diverged["liar"]]["reason"].startswith("CidMismatchError")


def test_bad_input_exits_2_naming_file_and_line(
    spark: Any, converged: Converged, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    good = Path(converged.dumps[0]).read_text().splitlines()
    bad.write_text("\n".join([*good[:2], '{"cid": "x"', *good[2:4]]) + "\n")
    assert run_convergence([converged.dumps[0], str(bad)], spark=spark) == 2
    assert f"{bad}:3: not valid JSON" in capsys.readouterr().err
    assert run_convergence([str(tmp_path / "nope.jsonl")], spark=spark) == 2
    assert "does not exist" in capsys.readouterr().err


def test_unpadded_base64url_decodes(spark: Any) -> None:
    """Payload segments of every length mod 4 decode without ``=`` padding."""
    from relay.protocol import b64url_encode

    rows = []
    for name in ("a", "ab", "abc", "abcd"):  # payload JSON lengths differ mod 4
        payload = json.dumps({"did": f"did:dfos:{name}", "createdAt": "2024-01-02T03:04:05.678Z"})
        token = f"e30.{b64url_encode(payload.encode())}.sig"
        rows.append(("r", 0, "cid", token, "artifact", "chain"))
    entries = spark.createDataFrame(
        rows,
        "relay string, relayIndex int, cid string, jwsToken string, kind string, chainId string",
    )
    decoded = decode_entries(entries).collect()
    assert [r["did"] for r in decoded] == [f"did:dfos:{n}" for n in ("a", "ab", "abc", "abcd")]
    assert {r["createdMs"] for r in decoded} == {1704164645678}
