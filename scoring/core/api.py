"""The public contract of the metric core: list metrics, score rows.

    from scoring.core.api import metric_specs, score_rows, OFFLINE_METRICS
    score_rows([{"id": 1, "summary": "...", "reference": "..."}], ["rouge1", "bleu"])

Each output row has ``id``, one float-or-None per requested metric, and ``errors``
mapping each metric that could not be computed for that row to a readable reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tqdm import tqdm

from modelserver import ChatConfig
from scoring.core.embeddings import embeddings_available, embeddings_installed
from scoring.core.judges import JudgeRunner, judge_config_from_env
from scoring.core.registry import INPUTS, MetricGroup, MetricSpec, RowOutcome, ScoringContext, groups, specs_by_name

__all__ = [
    "OFFLINE_METRICS",
    "MetricSpec",
    "embeddings_available",
    "metric_specs",
    "offline_metrics",
    "score_rows",
]

_CHUNK = 64

#: Metric names that run here with no network (computed on first access; see :func:`offline_metrics`).
OFFLINE_METRICS: tuple[str, ...]


def _unknown(names: Sequence[str]) -> list[str]:
    table = specs_by_name()
    return [name for name in names if name not in table]


def metric_specs(names: Sequence[str] | None = None) -> list[MetricSpec]:
    """Specs of the named metrics (in the order given), or of every registered metric.

    Raises ValueError naming any unknown metric.
    """
    table = specs_by_name()
    if names is None:
        return [spec for spec, _ in table.values()]
    unknown = _unknown(names)
    if unknown:
        raise ValueError(f"unknown metric{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    return [table[name][0] for name in names]


def offline_metrics(*, import_check: bool = True) -> tuple[str, ...]:
    """Names that run on this machine with no network: everything except LLM judges and metrics whose
    weights are not shipped (BLANC, SummaQA); embedding metrics only when the embeddings extra imports
    (``import_check=False``: when it is installed, judged without importing torch, for pages and listings)."""
    with_embeddings = embeddings_available() if import_check else embeddings_installed()
    return tuple(
        spec.name
        for group in groups()
        if group.offline and (with_embeddings or not group.uses_embeddings)
        for spec in group.specs
    )


def __getattr__(name: str) -> tuple[str, ...]:
    # OFFLINE_METRICS is computed on first access: deciding whether the embeddings extra
    # imports means importing torch, which importing this module should not pay for.
    if name == "OFFLINE_METRICS":
        value = offline_metrics()
        globals()["OFFLINE_METRICS"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _text(value: Any) -> str | None:
    """A row field as text: lists of strings (sentence lists) are joined with spaces."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return " ".join(v.strip() for v in value)
    raise ValueError(f"expected text or a list of sentences, got {type(value).__name__}")


def _judge_runner(judge: Any) -> Any:
    if isinstance(judge, JudgeRunner):
        return judge
    if isinstance(judge, ChatConfig):
        return JudgeRunner(judge)
    if judge is None:
        config = judge_config_from_env()
        return JudgeRunner(config) if config is not None else None
    raise TypeError("judge must be a ChatConfig, a JudgeRunner or None")


def score_rows(
    rows: Sequence[Mapping[str, Any]],
    metrics: Sequence[str],
    *,
    progress: bool = False,
    judge: Any = None,
    embedding_model: str | None = None,
    pause: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Score every row on every requested metric.

    rows: mappings with ``id``, ``summary`` and, as the metrics need, ``source``,
        ``reference``, ``query``, ``persona`` (text, or a list of sentences).
    metrics: metric names (see :func:`metric_specs`); unknown names raise ValueError.
    progress: show a tqdm progress bar on stderr.
    judge: a ``modelserver.ChatConfig`` or a ``scoring.core.judges.JudgeRunner``
        (whose ``usage`` then totals the calls and tokens spent) for the LLM-judge
        metrics; default from JUDGE_BASE_URL / JUDGE_MODEL / JUDGE_API_KEY.
    embedding_model: sentence-transformers model for the embedding metrics
        (default SCORING_EMBEDDING_MODEL, else the bundled all-MiniLM-L6-v2).
    pause: called before each row of a row-wise metric and each batch of a batched one (a
        caller that must make way for other work on its host sleeps in it); never for the LLM judges, whose
        work is the model server's (they give way there: ``modelserver.limits``).

    Returns one dict per row, in order: ``id``, each metric's float (None when it
    could not be computed) and ``errors``: {metric: reason}.
    """
    names = list(dict.fromkeys(metrics))
    unknown = _unknown(names)
    if unknown:
        raise ValueError(f"unknown metric{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
    table = specs_by_name()

    outputs: list[dict[str, Any]] = []
    inputs: list[dict[str, str] | None] = []
    for row in rows:
        out: dict[str, Any] = {"id": row.get("id")}
        out.update(dict.fromkeys(names))
        out["errors"] = {}
        outputs.append(out)
        try:
            fields = {key: _text(row.get(key)) for key in ("summary", *sorted(INPUTS))}
        except ValueError as exc:
            out["errors"].update(dict.fromkeys(names, f"bad input: {exc}"))
            inputs.append(None)
            continue
        # An empty summary is a legitimate input (scores 0 or is undefined per metric); other
        # inputs that are empty carry no information and count as missing.
        inputs.append({k: v for k, v in fields.items() if v is not None and (k == "summary" or v.strip())})

    # Which rows each implementation must compute, and for which outputs.
    plan: dict[str, tuple[MetricGroup, dict[frozenset[str], list[int]]]] = {}
    for index, row_inputs in enumerate(inputs):
        if row_inputs is None:
            continue
        for name in names:
            spec, group = table[name]
            missing = sorted(need for need in ({"summary"} | spec.needs) if need not in row_inputs)
            if missing:
                outputs[index]["errors"][name] = f"missing input: {', '.join(missing)}"
                continue
            plan.setdefault(group.key, (group, {}))
        for group, buckets in plan.values():
            wanted = frozenset(
                spec.name for spec in group.specs if spec.name in names and spec.name not in outputs[index]["errors"]
            )
            if wanted:
                buckets.setdefault(wanted, []).append(index)

    needs_judge = any(not group.offline and group.key.startswith("judge:") for group, _ in plan.values())
    ctx = ScoringContext(
        judge=_judge_runner(judge) if needs_judge else None, embedding_model=embedding_model, pause=pause
    )
    total = sum(len(indices) for _, buckets in plan.values() for indices in buckets.values())
    bar: Any = None
    if progress:
        bar = tqdm(total=total, desc="scoring", unit="row-metric")
    try:
        for group, buckets in plan.values():
            reason = group.unavailable_reason(ctx)
            for wanted, indices in buckets.items():
                if reason is not None:
                    for index in indices:
                        outputs[index]["errors"].update(dict.fromkeys(wanted, reason))
                    if bar is not None:
                        bar.update(len(indices))
                    continue
                for start in range(0, len(indices), _CHUNK):
                    chunk = indices[start : start + _CHUNK]
                    batch = [inputs[i] for i in chunk]
                    if pause is not None and group.pauses and not group.pauses_per_row:
                        pause()
                    results = group.compute([b for b in batch if b is not None], wanted, ctx)
                    for index, outcome in zip(chunk, results, strict=True):
                        _merge(outputs[index], outcome, wanted)
                    if bar is not None:
                        bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    return outputs


def _merge(out: dict[str, Any], outcome: RowOutcome, wanted: frozenset[str]) -> None:
    for name in wanted:
        if name in outcome.errors:
            out["errors"][name] = outcome.errors[name]
        elif name in outcome.values:
            value = float(outcome.values[name])
            if value != value:  # NaN from a library is not a score
                out["errors"][name] = "the metric returned NaN"
            else:
                out[name] = value
        else:
            out["errors"][name] = "the metric produced no value"
