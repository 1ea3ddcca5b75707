"""deploy/: the image's entrypoint command runs outside a container; the
compose file passes ``docker-compose config``."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from .conftest import DFOS_RELAY, RelayProcess

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def dockerfile_directives() -> list[tuple[str, str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    return [
        (m.group(1).upper(), m.group(2).strip())
        for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", text, re.MULTILINE)
        if not m.group(0).lstrip().startswith("#")
    ]


def test_dockerfile_is_slim_non_root_with_healthcheck() -> None:
    d = dockerfile_directives()
    assert any(k == "FROM" and "slim" in v for k, v in d)
    assert ("USER", "relay") in d
    assert any(k == "HEALTHCHECK" and "/healthz" in v for k, v in d)


def test_entrypoint_command_serves_outside_a_container(tmp_path: Path) -> None:
    d = dict(dockerfile_directives())
    entrypoint = json.loads(d["ENTRYPOINT"])
    assert entrypoint == ["dfos-relay", "serve", "--host", "0.0.0.0"]
    env = dict(re.findall(r"(DFOS_RELAY_\w+)=(\S+)", d["ENV"]))
    env["DFOS_RELAY_STORE"] = f"sqlite:///{tmp_path}/relay.db"  # the image's volume, here
    relay = RelayProcess([], env=env, command=[DFOS_RELAY, *entrypoint[1:]])
    try:
        assert httpx.get(relay.url + "/readyz").status_code == 200
    finally:
        code, _ = relay.stop()
    assert code == 0


def test_compose_file_passes_docker_compose_config() -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose is not installed (apt-get install -y docker-compose)")
    result = subprocess.run(
        [binary, "-f", str(DEPLOY / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "relay-b" in result.stdout and "postgresql://" in result.stdout
