"""platform/Dockerfile builds the same image twice and rebuilds little: an exact base release, the dependencies
from the hashed lock in a layer before the code, an EXTRAS build argument that picks an existing lock, and a
TORCH_BUILD build argument for the GPU image (torch's CUDA build from PyTorch's index, the rest of the lock as
locked). No Docker engine here: the install step's own shell runs, with pip replaced by a stand-in that prints
its arguments and keeps a copy of the requirements file it was given."""

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


def build_argument(name: str) -> str:
    """The default the Dockerfile gives a build argument (`ARG NAME=value`), as docker sets it for the steps."""
    found = [i.partition("=")[2].strip('"') for i in instructions() if i.startswith(f"ARG {name}=")]
    assert len(found) == 1, found
    return found[0]


def _install_step(
    extras: str, torch_build: str | None = None, kept: Path | None = None
) -> subprocess.CompletedProcess[str]:
    step = next(i for i in instructions() if i.startswith("RUN ") and "--require-hashes" in i)
    # pip prints its arguments, one a line, and copies the file after -r to $KEPT.
    stand_ins = (
        'pip() { printf "%s\\n" "$@"; previous=""; for a in "$@"; do '
        'if [ "$previous" = -r ] && [ -n "$KEPT" ]; then cp "$a" "$KEPT"; fi; previous="$a"; done; }; '
        "useradd() { :; }; "
    )
    return subprocess.run(  # noqa: S603 - the Dockerfile's own step, under sh as docker runs it
        ["sh", "-c", stand_ins + step.removeprefix("RUN ")],
        cwd=REPO,
        env={
            "PATH": "/usr/bin:/bin",
            "EXTRAS": extras,
            "TORCH_BUILD": build_argument("TORCH_BUILD") if torch_build is None else torch_build,
            "KEPT": str(kept or ""),
        },
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


def test_the_cpu_build_is_the_default() -> None:
    assert build_argument("TORCH_BUILD") == "cpu"


def locked(text: str) -> dict[str, list[str]]:
    """Each requirement of a lock with its hashes."""
    entries: dict[str, list[str]] = {}
    for block in re.split(r"\n(?=\S)", text):
        first = block.split()[0] if block.split() else ""
        if "==" in first:
            entries[first] = sorted(re.findall(r"--hash=(\S+)", block))
    return entries


def test_a_cuda_build_takes_the_locks_torch_from_that_index_and_every_other_package_as_locked(tmp_path: Path) -> None:
    kept = tmp_path / "rest.txt"
    done = _install_step("embeddings", "cu128", kept)
    assert done.returncode == 0, done.stderr
    calls = [c.strip().splitlines() for c in done.stdout.split("install\n") if c.strip()]
    lock = (REPO / "requirements/embeddings.txt").read_text()
    version = re.search(r"^torch==([^+\s]+)\+cpu", lock, re.MULTILINE)
    assert version, "the embeddings lock has torch's CPU build"
    # First torch alone, in the lock's version, from the CUDA index (its nvidia-* dependencies come with it) ...
    assert calls[0] == [f"torch=={version.group(1)}", "--index-url", "https://download.pytorch.org/whl/cu128"]
    # ... then the rest of the lock, hash-checked and not resolved again, so every locked version wins ...
    assert calls[1][:3] == ["--no-deps", "--require-hashes", "-r"] and calls[1][-1] == "check"
    expected = {name: hashes for name, hashes in locked(lock).items() if not name.startswith("torch==")}
    assert locked(kept.read_text()) == expected and len(expected) == len(locked(lock)) - 1


@pytest.mark.parametrize(
    ("extras", "torch_build", "message"),
    [
        ("", "cu128", "TORCH_BUILD=cu128: requirements/runtime.txt has no torch (EXTRAS=embeddings has)"),
        ("embeddings", "gpu", "TORCH_BUILD=gpu: cpu, or a CUDA build such as cu128"),
    ],
)
def test_a_torch_build_the_lock_cannot_take_stops_the_build_naming_it(
    extras: str, torch_build: str, message: str
) -> None:
    done = _install_step(extras, torch_build)
    assert done.returncode == 2 and message in done.stderr
    assert "install" not in done.stdout
