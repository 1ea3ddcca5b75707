"""deploy/: the image's entrypoint command runs outside a container; the
compose file is parsed and checked here (current format, healthy
dependencies, valid relay settings, /metrics unpublished), and the image
installs pinned versions from a small build context. Nothing is installed
on the system to check it."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import httpx
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from relay.settings import parse_settings

from .conftest import DFOS_RELAY, RelayProcess

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


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


def compose() -> dict[str, Any]:
    data = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_compose_file_is_current_and_waits_for_healthy_dependencies() -> None:
    spec = compose()
    assert "version" not in spec  # obsolete in the Compose specification
    services = spec["services"]
    assert {"postgres", "relay", "relay-b"} <= set(services)
    for name, service in services.items():
        for dependency, rule in (service.get("depends_on") or {}).items():
            assert dependency in services, (name, dependency)
            assert rule == {"condition": "service_healthy"}, (name, rule)
            target = services[dependency]
            # healthy needs a healthcheck: the service's own, or the image's
            assert "healthcheck" in target or _image_has_healthcheck(services, target)
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0]
            assert source in (spec.get("volumes") or {}), (name, source)


def _image_has_healthcheck(services: dict[str, Any], service: dict[str, Any]) -> bool:
    built = [
        s for s in services.values() if s.get("image") == service.get("image") and "build" in s
    ]
    return bool(built) and any(k == "HEALTHCHECK" for k, _ in dockerfile_directives())


def test_compose_relays_have_valid_settings_and_private_metrics() -> None:
    services = compose()["services"]
    image_env = dict(re.findall(r"(DFOS_RELAY_\w+)=(\S+)", dict(dockerfile_directives())["ENV"]))
    relays = [s for s in services.values() if s.get("image", "").startswith("dfos-relay")]
    assert len(relays) == 2
    for service in relays:
        env = {**image_env, **{k: str(v) for k, v in service["environment"].items()}}
        settings = parse_settings(env)  # raises on any bad value
        assert settings.metrics_port is not None
        published = {int(p.split(":")[-1]) for p in service.get("ports", [])}
        assert settings.port in published and settings.metrics_port not in published


def test_build_context_is_small_and_pinned() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for heavy in (".venv", ".git", "tests", "bench"):
        assert heavy in ignored
    build = compose()["services"]["relay"]["build"]
    assert (DEPLOY / build["context"]).resolve() == ROOT
    assert (ROOT / build["dockerfile"]).is_file()
    for kind, value in dockerfile_directives():
        if kind == "COPY":
            for source in value.split()[:-1]:
                assert (ROOT / source).exists(), source
    assert any(k == "RUN" and "-c constraints.txt" in v for k, v in dockerfile_directives())
    pins = {
        line.split("==")[0]: line.split("==")[1]
        for line in (DEPLOY / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in deploy/constraints.txt"
        assert requirement.specifier.contains(pins[name]), (name, pins[name])
