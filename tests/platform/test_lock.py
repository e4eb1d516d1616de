"""The hashed locks (requirements/*.txt, written by bin/lock) are in step with pyproject.toml and constraints.txt:
every pinned package is locked at its pinned version with its hashes, each profile holds what its extras ask
for, and nothing is locked that constraints.txt does not pin. A dependency added or bumped without running
bin/lock fails here, saying so."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
RELOCK = "run bin/lock and commit requirements/"
ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?:\s*\\\n\s*--hash=sha256:[0-9a-f]{64})*)", re.MULTILINE)


def locked(text: str) -> dict[str, tuple[str, int]]:
    """name -> (version, number of sha256 hashes) of each requirement in a lock."""
    return {canonicalize_name(m[1]): (m[2], m[3].count("--hash=sha256:")) for m in ENTRY.finditer(text)}


def pinned(text: str) -> dict[str, str]:
    return {
        canonicalize_name(name): version
        for name, version in re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, re.MULTILINE)
    }


def extras_of(lock: str) -> list[str]:
    found = re.search(r"^# extras:(.*)$", lock, re.MULTILINE)
    assert found, "a lock without bin/lock's header"
    return [e for e in found.group(1).strip().split(",") if e]


def problems(pyproject: dict[str, Any], constraints: str, locks: dict[str, str]) -> list[str]:
    pins = pinned(constraints)
    entries = {name: locked(text) for name, text in locks.items()}
    found: list[str] = []
    for name, text in locks.items():
        extras = extras_of(text)
        expected = "-".join(sorted(extras)) or "runtime"
        if name != expected:
            found.append(f"requirements/{name}.txt holds extras {extras}: bin/setup looks for {expected}.txt")
        wanted = [*pyproject["project"]["dependencies"], *pyproject["build-system"]["requires"]]
        wanted += [r for extra in extras for r in pyproject["project"]["optional-dependencies"][extra]]
        for requirement in map(Requirement, wanted):
            entry = entries[name].get(canonicalize_name(requirement.name))
            if entry is None:
                found.append(f"requirements/{name}.txt lacks {requirement.name}, which pyproject.toml asks for")
            elif not requirement.specifier.contains(Version(entry[0]).public, prereleases=True):
                found.append(f"requirements/{name}.txt has {requirement.name}=={entry[0]}, not {requirement}")
        for package, (version, hashes) in entries[name].items():
            if hashes == 0:
                found.append(f"requirements/{name}.txt has no hash for {package}")
            if package not in pins:
                found.append(f"requirements/{name}.txt locks {package}, which constraints.txt no longer pins")
            elif Version(version).public != Version(pins[package]).public:
                found.append(
                    f"requirements/{name}.txt locks {package}=={version}, constraints.txt pins {pins[package]}"
                )
    union = {package for entry in entries.values() for package in entry}
    found += [f"constraints.txt pins {p}=={v}, which no lock has" for p, v in pins.items() if p not in union]
    return found


def repository() -> tuple[dict[str, Any], str, dict[str, str]]:
    locks = {path.stem: path.read_text() for path in sorted((REPO / "requirements").glob("*.txt"))}
    return tomllib.loads((REPO / "pyproject.toml").read_text()), (REPO / "constraints.txt").read_text(), locks


def test_the_locks_are_in_step_with_pyproject_and_constraints() -> None:
    pyproject, constraints, locks = repository()
    assert problems(pyproject, constraints, locks) == [], RELOCK
    # bin/setup's profiles: bin/test's default (dev,embeddings), bin/demo's (none) and the image's EXTRAS.
    assert {"runtime", "dev-embeddings", "embeddings"} <= set(locks)


def test_a_forgotten_relock_is_caught_and_named() -> None:
    pyproject, constraints, locks = repository()
    # Dependencies change and bin/lock is not run: a pin bumped, a new one added, a dev package moved.
    pyproject["project"]["dependencies"].append("rank-bm25>=0.2")  # a dev package moved to the runtime
    constraints = constraints.replace("\nDjango==5.2.19\n", "\nDjango==5.2.20\n") + "brand-new-package==1.0\n"
    found = problems(pyproject, constraints, locks)
    assert "requirements/runtime.txt lacks rank-bm25, which pyproject.toml asks for" in found
    assert "requirements/runtime.txt locks django==5.2.19, constraints.txt pins 5.2.20" in found
    assert "constraints.txt pins brand-new-package==1.0, which no lock has" in found
    # A hash removed by hand.
    locks["runtime"] = re.sub(r"(gunicorn==\S+)(\s*\\\n\s*--hash=sha256:[0-9a-f]{64})+", r"\1", locks["runtime"])
    assert "requirements/runtime.txt has no hash for gunicorn" in problems(*repository()[:2], locks)


def test_torch_is_the_cpu_build_and_no_cuda_package_is_locked() -> None:
    for name, text in repository()[2].items():
        entries = locked(text)
        assert not [p for p in entries if p.startswith(("nvidia-", "triton", "cuda-"))], name
        if "embeddings" in extras_of(text):
            assert entries["torch"][0].endswith("+cpu"), name
