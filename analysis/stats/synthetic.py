"""Simulated tournament studies with known effects, for tests, benchmarks and power checks.

Each annotator answers queries; each query has one candidate per variant (model x condition), randomly
placed at bracket positions A-D, ranked by the study's pairwise tournament (A vs B, C vs D, final of the
two winners unless either first-round match was "neither"). A candidate's latent quality is the model's
strength plus, for personalised candidates, that model's persona effect and the annotator's own
persona taste; a decided match goes to the left side with probability
``logistic(quality_left - quality_right + position_bias)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt
import pandas as pd

from analysis.stats.table import COLUMNS

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SyntheticStudy:
    """Parameters of a simulated study (log-odds scale)."""

    n_annotators: int = 20
    queries_per_annotator: int = 8
    model_strength: Mapping[str, float] = field(default_factory=lambda: {"strong": 0.5, "weak": -0.5})
    persona_effect: Mapping[str, float] = field(default_factory=lambda: {"strong": 0.6, "weak": -0.3})
    annotator_persona_sd: float = 0.3
    position_bias: float = 0.0
    neither_rate: float = 0.05
    n_metrics: int = 0
    metric_signal: float = 0.3
    lower_is_better_every: int = 0
    median_seconds: float = 258.0
    study: str = "synthetic"
    seed: int = 0


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)), dtype=np.float64)


def simulate_comparisons(spec: SyntheticStudy, *, n_comparisons: int | None = None) -> pd.DataFrame:
    """A comparison table (the documented contract) for ``spec``; trimmed to ``n_comparisons`` rows if given."""
    rng = np.random.default_rng(spec.seed)
    models: Sequence[str] = list(spec.model_strength)
    variants = [(m, c) for m in models for c in ("persona", "generic")]
    if len(variants) != 4:
        raise ValueError("the simulated bracket has four candidates: give exactly two models")
    n_q = spec.n_annotators * spec.queries_per_annotator
    annot = np.repeat(np.arange(spec.n_annotators), spec.queries_per_annotator)
    taste = rng.normal(0.0, spec.annotator_persona_sd, spec.n_annotators)[annot]

    v_model = np.array([m for m, _ in variants], dtype=object)
    v_cond = np.array([c for _, c in variants], dtype=object)
    base = np.array([spec.model_strength[m] + (spec.persona_effect[m] if c == "persona" else 0.0) for m, c in variants])
    is_p = (v_cond == "persona").astype(np.float64)
    quality = base[None, :] + taste[:, None] * is_p[None, :] + rng.normal(0.0, 0.2, (n_q, 4))
    # Bracket positions: column k of `perm` is the variant at position A, B, C, D.
    perm = np.argsort(rng.random((n_q, 4)), axis=1)
    rows_q = np.arange(n_q)

    def play(left_v: npt.NDArray[np.int64], right_v: npt.NDArray[np.int64]) -> npt.NDArray[np.object_]:
        diff = quality[rows_q, left_v] - quality[rows_q, right_v] + spec.position_bias
        left_wins = rng.random(n_q) < _sigmoid(diff)
        neither = rng.random(n_q) < spec.neither_rate
        return np.where(neither, "neither", np.where(left_wins, "left", "right")).astype(object)

    # Left/right placement inside a match is randomised too.
    flip_ab = rng.random(n_q) < 0.5
    flip_cd = rng.random(n_q) < 0.5
    ab_left = np.where(flip_ab, 1, 0)
    cd_left = np.where(flip_cd, 3, 2)
    matches = []
    for name, left_pos in (("round1_ab", ab_left), ("round1_cd", cd_left)):
        right_pos = 1 - left_pos if name == "round1_ab" else 5 - left_pos
        lv, rv = perm[rows_q, left_pos], perm[rows_q, right_pos]
        matches.append((name, left_pos, right_pos, lv, rv, play(lv, rv)))
    (_, ab_l, ab_r, ab_lv, ab_rv, ab_c), (_, cd_l, cd_r, cd_lv, cd_rv, cd_c) = matches
    win_ab = np.where(ab_c == "left", ab_l, ab_r)
    win_cd = np.where(cd_c == "left", cd_l, cd_r)
    flip_f = rng.random(n_q) < 0.5
    f_l = np.where(flip_f, win_cd, win_ab)
    f_r = np.where(flip_f, win_ab, win_cd)
    f_lv, f_rv = perm[rows_q, f_l], perm[rows_q, f_r]
    f_c = play(f_lv, f_rv)
    has_final = (ab_c != "neither") & (cd_c != "neither")
    matches.append(("final", f_l, f_r, f_lv, f_rv, f_c))

    letters = np.array(list("ABCD"), dtype=object)
    frames = []
    t0 = datetime(2025, 1, 1, tzinfo=UTC).timestamp()
    for name, lp, rp, lv, rv, choice in matches:
        keep = has_final if name == "final" else np.ones(n_q, dtype=bool)
        q = rows_q[keep]
        secs = rng.lognormal(np.log(spec.median_seconds), 0.5, q.size)
        shown = t0 + q * 3600.0 + {"round1_ab": 0, "round1_cd": 1000, "final": 2000}[name]
        ch = choice[keep]
        frame = {
            "study": spec.study,
            "annotator": np.char.add("ann-", np.char.zfill(annot[q].astype(str), 4)).astype(object),
            "query_id": np.char.add("q", q.astype(str)).astype(object),
            "query_index": (q % spec.queries_per_annotator) + 1,
            "bracket_id": np.char.add("b", q.astype(str)).astype(object),
            "match": name,
            "round": 2 if name == "final" else 1,
            "stage": "final" if name == "final" else "round1",
            "bracket_pair": {"round1_ab": "AB", "round1_cd": "CD", "final": "final"}[name],
            "left_candidate": np.char.add(np.char.add("c", q.astype(str)), letters[lp[keep]].astype(str)).astype(
                object
            ),
            "right_candidate": np.char.add(np.char.add("c", q.astype(str)), letters[rp[keep]].astype(str)).astype(
                object
            ),
            "left_position": letters[lp[keep]],
            "right_position": letters[rp[keep]],
            "left_model": v_model[lv[keep]],
            "right_model": v_model[rv[keep]],
            "left_condition": v_cond[lv[keep]],
            "right_condition": v_cond[rv[keep]],
            "choice": ch,
            "shown_at": pd.to_datetime(shown, unit="s", utc=True),
            "answered_at": pd.to_datetime(shown + secs, unit="s", utc=True),
            "seconds_on_page": secs,
            # Rows go query round by query round across annotators, so a trimmed table keeps everyone.
            "_order": ((q % spec.queries_per_annotator) * spec.n_annotators + annot[q]) * 3
            + {"round1_ab": 0, "round1_cd": 1, "final": 2}[name],
            "_lq": quality[q, lv[keep]],
            "_rq": quality[q, rv[keep]],
        }
        frames.append(pd.DataFrame(frame))
    table = pd.concat(frames, ignore_index=True).sort_values("_order", kind="stable").reset_index(drop=True)
    table["left_system"] = table["left_model"] + "/" + table["left_condition"]
    table["right_system"] = table["right_model"] + "/" + table["right_condition"]
    decided = table["choice"] != "neither"
    table["winner_side"] = table["choice"].where(decided, None)
    for attr in ("system", "model", "condition"):
        table[f"winner_{attr}"] = np.where(
            table["choice"] == "left",
            table[f"left_{attr}"],
            np.where(table["choice"] == "right", table[f"right_{attr}"], None),
        )
    metric_cols: dict[str, FloatArray] = {}
    for m in range(spec.n_metrics):
        name = f"metric_{m:02d}"
        sign = -1.0 if spec.lower_is_better_every and (m + 1) % spec.lower_is_better_every == 0 else 1.0
        for side, col in (("left", "_lq"), ("right", "_rq")):
            noise = rng.normal(0.0, 1.0, len(table))
            metric_cols[f"{side}__{name}"] = np.round(sign * spec.metric_signal * table[col].to_numpy() + noise, 3)
    table = table.drop(columns=["_order", "_lq", "_rq"])
    table = table[list(COLUMNS)]
    if metric_cols:
        table = pd.concat([table, pd.DataFrame(metric_cols)], axis=1)
    if n_comparisons is not None:
        table = table.iloc[:n_comparisons].reset_index(drop=True)
    return table


def lower_is_better_metrics(spec: SyntheticStudy) -> dict[str, bool]:
    """``higher_is_better`` mapping matching ``spec`` (every ``lower_is_better_every``-th metric is lower-better)."""
    return {
        f"metric_{m:02d}": not (spec.lower_is_better_every and (m + 1) % spec.lower_is_better_every == 0)
        for m in range(spec.n_metrics)
    }
