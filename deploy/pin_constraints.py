"""Print pins for the run-time dependency closure of dfos-relay, as installed
in the running interpreter's environment (for deploy/constraints.txt)."""

from __future__ import annotations

import importlib.metadata as md
import re
import sys

from packaging.requirements import Requirement

HEADER = """# Pinned versions of what the relay needs at run time (the image installs
# with -c deploy/constraints.txt). Regenerate after a dependency change with
#   .venv/bin/python deploy/pin_constraints.py > deploy/constraints.txt"""


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(roots: list[str]) -> dict[str, str]:
    pins: dict[str, str] = {}
    stack = list(roots)
    while stack:
        name = _norm(stack.pop())
        if name in pins:
            continue
        dist = md.distribution(name)
        pins[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            stack.append(req.name)
    return pins


def main() -> int:
    own = md.distribution("dfos-relay")
    requirements = [Requirement(text) for text in own.requires or []]
    roots = [r.name for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]
    print(HEADER)
    for name, version in sorted(closure(roots).items()):
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
