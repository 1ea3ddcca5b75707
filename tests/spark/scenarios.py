"""Workloads with named handles, and dump-line surgery for injected faults."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from relay.protocol import TYP_ARTIFACT, cid_of, format_timestamp, sign_jws
from relay.testing.workload import DAY_MS, Actor, ContentHandle, WorkloadBuilder


@dataclass
class Story:
    builder: WorkloadBuilder
    actors: list[Actor] = field(default_factory=list)
    chains: list[ContentHandle] = field(default_factory=list)

    def take(self) -> list[str]:
        """Tokens signed since the last call."""
        tokens = list(self.builder.tokens)
        self.builder.tokens.clear()
        return tokens


def story(groups: int, seed: int) -> Story:
    """Per group: two identities, a content chain with a fork and a delegated
    edit, a rotation, a beacon, an artifact and countersignatures."""
    now = time.time_ns() // 1_000_000
    s = Story(WorkloadBuilder(seed=seed, start_ms=now - 30 * DAY_MS, step_ms=500))
    b = s.builder
    for _ in range(groups):
        alice, bob = b.identity(), b.identity()
        chain = b.content_create(alice)
        b.content_update(chain)
        b.content_update(chain)
        b.content_update(chain, parent=chain.ops[1])
        cred = b.write_credential(alice, bob, chain.content_id)
        b.content_update(chain, bob, authorization=cred)
        b.rotate(alice)
        b.content_update(chain)
        b.beacon(alice, [chain.content_id])
        art = b.artifact(bob)
        b.countersign(alice, art)
        s.actors += [alice, bob]
        s.chains.append(chain)
    return s


def wrong_cid_artifact(b: WorkloadBuilder, signer: Actor) -> tuple[str, str]:
    """A correctly signed artifact whose header cid is not its payload's CID."""
    payload = {
        "version": 1,
        "type": "artifact",
        "did": signer.did,
        "content": {"$schema": "https://schemas.dfos.com/profile/v1", "name": "liar"},
        "createdAt": format_timestamp(b.tick()),
    }
    fake = cid_of({"not": "this payload"})
    header = {"alg": "EdDSA", "typ": TYP_ARTIFACT, "kid": signer.kid, "cid": fake}
    return fake, sign_jws(header, payload, signer.keypair)


def entry_line(cid: str, token: str, kind: str, chain_id: str) -> str:
    return json.dumps({"cid": cid, "jwsToken": token, "kind": kind, "chainId": chain_id})


def append_line(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def tamper_signature(path: Path, cid: str) -> None:
    """Flip one signature character of the entry ``cid`` in a dump file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        entry = json.loads(line)
        if entry["cid"] == cid:
            head, payload, sig = entry["jwsToken"].split(".")
            flipped = sig[:10] + ("A" if sig[10] != "A" else "B") + sig[11:]
            entry["jwsToken"] = f"{head}.{payload}.{flipped}"
            lines[i] = json.dumps(entry)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
