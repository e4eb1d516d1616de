"""Which device the embedding metrics and BERTScore run on (METRICS_DEVICE), and their batch size."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

try:
    import torch
except ImportError:  # the embeddings extra; without it the module is skipped, not a collection error
    require(False, "torch is not installed (the embeddings extra: EXTRAS=dev,embeddings bin/setup)")

from scoring.core import embeddings
from scoring.core.embeddings import configure, parse_device, resolve_device


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")],
)
def test_auto_prefers_cuda_then_mps_then_the_cpu(cuda: bool, mps: bool, expected: str) -> None:
    assert resolve_device("auto", cuda_available=cuda, mps_available=mps) == expected


def test_auto_on_this_cpu_only_machine_is_the_cpu() -> None:
    assert not torch.cuda.is_available()  # the CPU build of torch is installed here
    assert resolve_device("auto") == "cpu"


@pytest.mark.parametrize(
    ("given", "expected"), [("cpu", "cpu"), ("CUDA", "cuda"), (" cuda:1 ", "cuda:1"), ("mps", "mps")]
)
def test_a_forced_device_is_used_even_when_another_is_there(given: str, expected: str) -> None:
    assert resolve_device(given, cuda_available=True, mps_available=True) == expected


@pytest.mark.parametrize("bad", ["gpu", "cuda:", "cuda:x", "", "tpu:0"])
def test_an_unknown_device_is_refused_with_the_choices(bad: str) -> None:
    with pytest.raises(ValueError, match="auto, cpu, mps, cuda, cuda:N"):
        parse_device(bad)


def test_batch_size_must_be_positive_and_becomes_the_default() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        configure(batch_size=0)
    try:
        configure(device="cpu", batch_size=7)
        assert embeddings._settings == {"device": "cpu", "batch_size": 7}
    finally:
        configure()


def test_every_process_takes_the_device_and_batch_size_from_the_settings_at_start_up() -> None:
    # Not only a scoring chunk: a stress-test job and `manage.py score_texts` or `stress_test` score in a
    # process that never ran one, and used to fall back to auto (a shared GPU) and 32.
    root = Path(__file__).resolve().parents[2]
    probe = "import django; django.setup(); from scoring.core import embeddings; print(embeddings._settings)"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "METRICS_DEVICE": "cpu", "METRICS_BATCH_SIZE": "5"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "{'device': 'cpu', 'batch_size': 5}"
