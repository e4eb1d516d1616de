"""platform/Dockerfile builds the same image twice and rebuilds little: an exact base release, the dependencies
from the hashed lock in a layer before the code, and an EXTRAS build argument that picks an existing lock. No
Docker engine here: the install step's own shell runs, with pip replaced by a stand-in that prints its
arguments."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "platform" / "Dockerfile"


def instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"^\s*#.*\n", "", DOCKERFILE.read_text(), flags=re.MULTILINE)
    return [line.strip() for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def test_the_base_image_is_an_exact_python_release_of_the_projects_version() -> None:
    base = [i for i in instructions() if i.startswith("FROM ")]
    assert len(base) == 1, base
    found = re.fullmatch(r"FROM python:(3\.\d+)\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base[0])
    assert found, f"{base[0]}: not an exact release tag (python:3.11.<patch>-slim-bookworm)"
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    assert f">={found.group(1)}" in requires, requires


def test_the_dependencies_come_from_the_hashed_lock_before_the_code_is_copied() -> None:
    steps = instructions()
    locked = [n for n, i in enumerate(steps) if i.startswith("RUN ") and "--require-hashes" in i]
    code = steps.index("COPY . .")
    assert len(locked) == 1 and locked[0] < code, steps
    # Before the lock is installed only the locks are in the image, so a code change leaves that layer cached.
    assert [i for i in steps[: locked[0]] if i.startswith(("COPY", "ADD"))] == ["COPY requirements/ requirements/"]
    project = [i for i in steps[code:] if "pip install" in i]
    assert len(project) == 1 and "--no-deps" in project[0] and "--no-build-isolation" in project[0], project
    assert "requirements" not in (REPO / ".dockerignore").read_text()


def _install_step(extras: str) -> subprocess.CompletedProcess[str]:
    step = next(i for i in instructions() if i.startswith("RUN ") and "--require-hashes" in i)
    stand_ins = 'pip() { printf "%s\\n" "$@"; }; useradd() { :; }; '
    return subprocess.run(  # noqa: S603 - the Dockerfile's own step, under sh as docker runs it
        ["sh", "-c", stand_ins + step.removeprefix("RUN ")],
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "EXTRAS": extras},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.mark.parametrize(
    ("extras", "lock"),
    [
        ("", "runtime"),
        ("embeddings", "embeddings"),
        ("dev,embeddings", "dev-embeddings"),
        ("embeddings, dev", "dev-embeddings"),
    ],
)
def test_the_extras_build_argument_installs_that_profiles_lock(extras: str, lock: str) -> None:
    done = _install_step(extras)
    assert done.returncode == 0, done.stderr
    arguments = done.stdout.split()
    assert "--require-hashes" in arguments
    installed = arguments[arguments.index("-r") + 1]
    assert installed == f"requirements/{lock}.txt" and (REPO / installed).is_file()
    # torch's CPU build is on PyTorch's own index, asked for only where the lock has torch.
    assert ("--extra-index-url" in arguments) == ("torch==" in (REPO / installed).read_text())


def test_extras_without_a_lock_stop_the_build_naming_them() -> None:
    done = _install_step("gpu")
    assert done.returncode == 2 and "EXTRAS=gpu: no requirements/gpu.txt" in done.stderr
    assert "--require-hashes" not in done.stdout
