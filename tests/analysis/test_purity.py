"""The statistics core, report, exports, legacy reader and CLI import nothing from Django."""

from __future__ import annotations

import subprocess
import sys

import pytest

from analysis.stats import AnalysisConfig


def test_pure_modules_do_not_import_django():
    code = (
        "import sys; import analysis.stats, analysis.stats.synthetic, analysis.report, analysis.exports, "
        "analysis.legacy, analysis.cli; "
        "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_config_is_frozen_and_serialisable():
    config = AnalysisConfig(metric_thresholds={"rouge1": 0.01}, reference_levels={"round_stage": "final"})
    with pytest.raises(TypeError):
        config.metric_thresholds["rouge1"] = 0.5  # type: ignore[index]
    with pytest.raises(AttributeError):
        config.seed = 3  # type: ignore[misc]
    assert AnalysisConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError):
        AnalysisConfig(metric_thresholds={"x": -1.0})
