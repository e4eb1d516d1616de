"""Scoring a study's candidates: start a run, score chunks in the background, store per metric version."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from annotation.models import Candidate, Judgment, Participation
from annotation.services.generation import broker_restarted
from generation.settings import configure_model_servers, judge_from_settings
from kernel.db import connection_release, database_retried
from kernel.exceptions import ApplicationError
from kernel.heartbeat import heartbeat
from kernel.tasks import broker_started_at, enqueue_on_commit
from kernel.yielding import research_pause
from modelserver import ChatConfig, map_concurrently
from scoring.core.judges import (
    PROMPT_VERSIONS,
    JudgeError,
    JudgeIdentity,
    JudgeRunner,
    metric_prompt_version,
)
from scoring.inputs import REFERENCE_CHOICES, SOURCE_CHOICES, candidate_rows, persona_text
from scoring.models import CandidateScore, PairwiseVote, ScoringRun
from studies.models import Study
from studies.models_audit import AuditEvent, AuditOrigin
from studies.services.audit import audit_record

logger = logging.getLogger(__name__)
CHUNK_SIZE = 50
# A running run whose lease has expired (no chunk has renewed it: its workers died, or its messages
# were lost) has its unfinished chunks sent again, with a window of `requeue_window()` before the next
# look; after MAX_RESTARTS such restarts without finishing, it fails with its progress in the reason.
MAX_RESTARTS = 10
# The chunk's task, sent by the name it is registered and routed under (scoring/tasks.py imports this module,
# so this module names the task rather than import it: kernel/tasks.py).
SCORE_CHUNK = "scoring.tasks.score_chunk"


def requeue_window() -> timedelta:
    """How long a run's sent chunks may wait for a worker before they are sent again (SWEEP_SCORING_WINDOW_S)."""
    return timedelta(seconds=settings.SWEEP_SCORING_WINDOW_S)


def _lease() -> timedelta:
    return timedelta(seconds=settings.BACKGROUND_LEASE_S)


def _specs(metrics: list[str]) -> dict[str, Any]:
    # The metric suite loads on first use, not in every web process.
    from scoring.core.api import metric_specs  # rouge-score, nltk, scikit-learn

    try:
        return {spec.name: spec for spec in metric_specs(metrics)}
    except ValueError as error:
        raise ApplicationError(str(error), field="metrics") from error


PAIRWISE = "pairwise"
"""The metric name of a pairwise run: the annotator-style judge over a study's answered matches."""


def _judge_option(judge: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The judge a run records: ``{"model", "base_url", "server"}`` from ``judge`` or JUDGE_BASE_URL /
    JUDGE_MODEL (and JUDGE_NAME) settings; the API key stays in the settings (JUDGE_API_KEY), never in the run."""
    if judge is None:
        config = judge_from_settings()
        if not config.configured:
            return None
        judge = {"model": config.model, "base_url": config.base_url, "name": config.name}
    unknown = sorted(set(judge) - {"model", "base_url", "name"})
    if unknown:
        raise ApplicationError(f"Unknown judge settings: {', '.join(unknown)}.", field="judge")
    model, base_url = str(judge.get("model") or "").strip(), str(judge.get("base_url") or "").strip()
    if not model or not base_url:
        raise ApplicationError("A judge needs a model and a base URL.", field="judge")
    try:
        identity = JudgeIdentity.of(model=model, base_url=base_url, name=str(judge.get("name") or ""))
    except ValueError as error:
        raise ApplicationError(str(error), field="judge") from error
    if len(identity.model) > 100 or len(identity.server) > 100:
        # Both go into the score's version (255 characters with the metric's own version).
        raise ApplicationError("A judge's model and server names must be at most 100 characters.", field="judge")
    return {"model": identity.model, "base_url": base_url, "server": identity.server}


def _judge_runner(options: Mapping[str, Any]) -> Any:
    configure_model_servers()  # the deployment's model-server limit and LLM cache (docs/backends.md)

    judge = options.get("judge")
    if not judge:
        return None
    api_key = judge_from_settings().api_key or "EMPTY"
    return JudgeRunner(ChatConfig(base_url=judge["base_url"], model=judge["model"], api_key=api_key))


def _answered_match_ids(study: Study) -> list[int]:
    return list(
        # Attention checks are not data: the pairwise judge spends no model call on them.
        Judgment.objects.filter(match__bracket__query__participation__study=study, match__check_expected="")
        .exclude(match__bracket__query__participation__source=Participation.Source.PREVIEW)  # not data either
        .order_by("match_id")
        .values_list("match_id", flat=True)
    )


@transaction.atomic
def pairwise_run_start(
    *, study: Study, judge: Mapping[str, Any] | None = None, by: Any = None, origin: str = AuditOrigin.CODE
) -> ScoringRun:
    """Queue the annotator-style pairwise judge over every answered match of a study, in both orders."""
    option = _judge_option(judge)
    if option is None:
        raise ApplicationError("Configure a judge (model and base URL) for the pairwise judge.", field="judge")
    return _run_create(
        study=study,
        metrics=[PAIRWISE],
        options={"unit": "match", "judge": option},
        by=by,
        origin=origin,
        ids=_answered_match_ids(study),
    )


@transaction.atomic
def scoring_run_start(
    *,
    study: Study,
    metrics: list[str],
    by: Any = None,
    origin: str = AuditOrigin.CODE,
    reference: str = "titles",
    source: str = "abstracts",
    judge: Mapping[str, Any] | None = None,
) -> ScoringRun:
    """Queue the scoring of every generated candidate of a study; chunks run in parallel on workers.

    Judge metrics are scored by ``judge`` (``{"model", "base_url", "name"}``; default: the JUDGE_*
    environment), whose identity is stored with every score."""
    if not metrics:
        raise ApplicationError("Choose at least one metric.", field="metrics")
    if metrics == ["offline"]:
        # As `python -m scoring.cli --metrics offline`: every metric that runs here with no network.
        from scoring.core.api import offline_metrics  # the metric suite: rouge-score, nltk, scikit-learn

        metrics = list(offline_metrics())
    if reference not in REFERENCE_CHOICES:
        raise ApplicationError(f"Reference must be one of {', '.join(REFERENCE_CHOICES)}.", field="reference")
    if source not in SOURCE_CHOICES:
        raise ApplicationError(f"Source must be one of {', '.join(SOURCE_CHOICES)}.", field="source")
    specs = _specs(metrics)
    options: dict[str, Any] = {"reference": reference, "source": source}
    if any(spec.family == "llm_judge" for spec in specs.values()):
        option = _judge_option(judge)
        if option is not None:
            options["judge"] = option
    ids = list(
        Candidate.objects.filter(query__participation__study=study, status=Candidate.Status.DONE)
        # A researcher's preview is not data: no analysis reads its scores, and a restart deletes it mid-run.
        .exclude(query__participation__source=Participation.Source.PREVIEW)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return _run_create(study=study, metrics=metrics, options=options, by=by, origin=origin, ids=ids)


def _run_create(
    *,
    study: Study,
    metrics: list[str],
    options: dict[str, Any],
    by: Any,
    ids: list[int],
    origin: str = AuditOrigin.CODE,
) -> ScoringRun:
    run = ScoringRun.objects.create(
        study=study,
        metrics=metrics,
        options=options,
        total=len(ids),
        created_by=by if by is not None and getattr(by, "is_authenticated", False) else None,
        status=ScoringRun.Status.RUNNING if ids else ScoringRun.Status.DONE,
        finished_at=None if ids else timezone.now(),
        chunks=[ids[start : start + CHUNK_SIZE] for start in range(0, len(ids), CHUNK_SIZE)],
        lease_expires_at=timezone.now() + requeue_window(),
    )
    audit_record(
        study=study,
        by=by,
        origin=origin,
        event_type=AuditEvent.SCORING_RUN_STARTED,
        object_type="scoring run",
        object_id=run.pk,
        object_repr=f"scoring run {run.pk}",
        after={"metrics": metrics, "options": options, "total": run.total},
    )
    _send_chunks(run=run, indexes=range(min(len(run.chunks), _max_inflight(run))))
    return run


def _max_inflight(run: ScoringRun) -> int:
    if current_app.conf.task_always_eager:
        # Run in this process (`score_study --now`): no broker to flood, and a chunk sending the next from its
        # own commit would nest one call per chunk until Python's recursion limit (about 90 chunks) stopped
        # the run. Every chunk is sent at the start, and each runs after the one before has returned.
        return max(1, len(run.chunks))
    return max(1, int(settings.RESEARCH_MAX_INFLIGHT_CHUNKS))


def _sent(run: ScoringRun) -> int:
    """How many chunks, in order, have been sent so far. A run sends its first RESEARCH_MAX_INFLIGHT_CHUNKS
    and each counted chunk sends the next one, so chunks 0 .. done + N - 1 have been sent and at most N are
    queued or running at any time: a run over a whole study never floods the broker."""
    return min(len(run.chunks), len(run.chunks_done) + _max_inflight(run))


def _send_chunks(*, run: ScoringRun, indexes: Any) -> None:
    for index in indexes:
        enqueue_on_commit(SCORE_CHUNK, run.pk, run.chunks[index], index)


def _chunk_index(run: ScoringRun, candidate_ids: list[int], chunk_index: int | None) -> int | None:
    if chunk_index is not None and 0 <= chunk_index < len(run.chunks) and run.chunks[chunk_index] == candidate_ids:
        return chunk_index
    return run.chunks.index(candidate_ids) if candidate_ids in run.chunks else None


def scoring_run_lease_renew(*, run_id: int) -> None:
    ScoringRun.objects.filter(pk=run_id, status=ScoringRun.Status.RUNNING).update(
        lease_expires_at=timezone.now() + _lease()
    )


def scoring_run_chunk(*, run_id: int, candidate_ids: list[int], chunk_index: int | None = None) -> int:
    """Score one chunk and store the results; re-running a chunk overwrites the same rows, and a chunk
    delivered twice is counted once (the run records which chunks are done)."""
    from scoring.core.api import score_rows  # the metric suite: rouge-score, nltk, scikit-learn

    run = ScoringRun.objects.get(pk=run_id)
    index = _chunk_index(run, candidate_ids, chunk_index)
    if run.status != ScoringRun.Status.RUNNING or index in run.chunks_done:
        return 0
    # Between rows, and before storing, the chunk makes way for annotator work on this host (kernel/yielding.py).
    pause = research_pause()
    with heartbeat(
        lambda: scoring_run_lease_renew(run_id=run_id), every=settings.BACKGROUND_HEARTBEAT_S, name=f"run {run_id}"
    ):
        scoring_run_lease_renew(run_id=run_id)
        if run.options.get("unit") == "match":
            store = _judge_matches(run, candidate_ids)
        else:
            store = _score_candidates(run, candidate_ids, score_rows, pause=pause)
        # Judges' work is the model server's (their lanes make them give way there): a run of judges alone does
        # not wait for the host's annotator work before storing either.
        if run.options.get("unit") != "match" and any(
            spec.family != "llm_judge" for spec in _specs(list(run.metrics)).values()
        ):
            pause()
    if pause.pauses:
        logger.info(
            "run %s chunk %s paused %d times, %.2f s in all, for annotator work", run_id, index, pause.pauses,
            pause.paused_s,
        )  # fmt: skip
    # The judges' answers are minutes of a model server's time: a database away when they are in (a restart, a
    # fail-over) is waited for, not a reason to ask them again. Storing is an upsert and counting is under the
    # run's row lock, so an attempt whose commit was lost with its connection may run again (issue 30).
    return database_retried(
        lambda: _chunk_store(run_id=run_id, index=index, candidate_ids=candidate_ids, store=store),
        within_s=settings.DATABASE_RETRY_WITHIN_S,
        what=f"run {run_id} chunk {index}",
    )


def _chunk_store(*, run_id: int, index: int | None, candidate_ids: list[int], store: Any) -> int:
    """Store a chunk's scores and count the chunk, once (the run records which chunks are done)."""
    with transaction.atomic():
        count = store()
        run = ScoringRun.objects.select_for_update().get(pk=run_id)
        if run.status != ScoringRun.Status.RUNNING or index in run.chunks_done:
            return 0
        # A counted chunk is progress: the restarts that fail a run count windows in a row without any.
        fields = ["done", "lease_expires_at", "restarts"]
        run.done += len(candidate_ids)
        run.restarts = 0
        run.lease_expires_at = timezone.now() + requeue_window()
        if index is not None:
            run.chunks_done = sorted([*run.chunks_done, index])
            fields.append("chunks_done")
        finished = len(run.chunks_done) >= len(run.chunks) if run.chunks else run.done >= run.total
        if finished:
            run.status = ScoringRun.Status.DONE
            run.finished_at = timezone.now()
            run.lease_expires_at = None
            fields += ["status", "finished_at"]
        run.save(update_fields=fields)
        if index is not None and not finished:
            # This chunk's slot goes to the next unsent one (sent once the count is committed).
            following = len(run.chunks_done) - 1 + _max_inflight(run)
            if following < len(run.chunks):
                _send_chunks(run=run, indexes=[following])
    return count


_SCORE_KEY = ("candidate_id", "metric", "judge_model", "judge_server", "prompt_version", "version")
_SCORE_ROWS_PER_STATEMENT = 1000  # 9 parameters a row, well under PostgreSQL's 65535 per statement


def _scores_upsert(scores: list[CandidateScore]) -> None:
    """Insert the scores, or update the ones stored under the same key; a value not computed (None, with its
    reason) never replaces a stored value.

    That a run could not compute a value (its judge down or answering garbage) does not make the stored one
    wrong, and overwriting it would lose what the study's analysis already reads. The rule is the upsert's own
    condition (ON CONFLICT ... DO UPDATE ... WHERE), checked against the row as committed when the write
    happens: read first and written after, a run that failed overwrote a value another run committed in
    between. One statement per chunk (not a read and a write per score): the research worker's database
    work, which runs at the server's priority whatever the worker's, stays small."""
    if not scores:
        return
    table = connection.ops.quote_name(CandidateScore._meta.db_table)
    key = ", ".join(connection.ops.quote_name(column) for column in _SCORE_KEY)
    columns = [*_SCORE_KEY, "value", "reason", "computed_at"]
    now = timezone.now()
    for start in range(0, len(scores), _SCORE_ROWS_PER_STATEMENT):
        batch = scores[start : start + _SCORE_ROWS_PER_STATEMENT]
        placeholders = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(batch))
        params = [
            value
            for score in batch
            for value in (*(getattr(score, f) for f in _SCORE_KEY), score.value, score.reason, now)
        ]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(map(connection.ops.quote_name, columns))}) "  # noqa: S608 - names, not input
                f"VALUES {placeholders} ON CONFLICT ({key}) DO UPDATE SET "
                "value = EXCLUDED.value, reason = EXCLUDED.reason, computed_at = EXCLUDED.computed_at "
                f"WHERE EXCLUDED.value IS NOT NULL OR {table}.value IS NULL",
                params,
            )


def _score_candidates(run: ScoringRun, candidate_ids: list[int], score_rows: Any, *, pause: Any = None) -> Any:
    """Score a chunk of candidates (outside a transaction); returns the function that stores the scores."""
    specs = _specs(list(run.metrics))
    candidates = (
        Candidate.objects.filter(pk__in=candidate_ids)
        .select_related("query__persona")
        .prefetch_related("query__documents")
    )
    judge = run.options.get("judge") or None
    inputs = {k: v for k, v in run.options.items() if k in ("reference", "source")}
    texts = candidate_rows(candidates, **inputs)
    # The judges take minutes: the connection goes back to the process's pool meanwhile (kernel.db).
    connection_release()
    results = score_rows(texts, list(run.metrics), judge=_judge_runner(run.options), pause=pause)

    def store() -> int:
        rows: dict[tuple[Any, ...], CandidateScore] = {}  # by key: one statement may not update a row twice
        for result in results:
            errors = result.get("errors") or {}
            for metric in run.metrics:
                value = result.get(metric)
                spec = specs[metric]
                key: dict[str, Any] = {"version": spec.version}
                if spec.family == "llm_judge" and judge:
                    # The judge is part of the score's identity: a second judge adds rows, never overwrites.
                    key = {
                        "judge_model": judge["model"],
                        "judge_server": judge["server"],
                        "prompt_version": metric_prompt_version(metric),
                        "version": f"{spec.version}; judge {judge['model']}@{judge['server']}",
                    }
                score = CandidateScore(
                    candidate_id=result["id"],
                    metric=metric,
                    **key,
                    value=float(value) if isinstance(value, int | float) else None,
                    reason="" if isinstance(value, int | float) else str(errors.get(metric, "not computed")),
                )
                rows[(score.candidate_id, metric, *sorted(key.items()))] = score
        _scores_upsert(list(rows.values()))
        return len(results)

    return store


_SIDE = {"A": "left", "B": "right", "Neither": "neither"}


def _judge_matches(run: ScoringRun, match_ids: list[int]) -> Any:
    """Ask the pairwise judge about a chunk of answered matches in both orders (outside a transaction)."""
    judge = run.options["judge"]
    runner = _judge_runner(run.options)
    judgments = list(
        Judgment.objects.filter(match_id__in=match_ids).select_related(
            "match__left", "match__right", "match__bracket__query__persona"
        )
    )
    connection_release()  # the judges take minutes: the connection goes back to the pool meanwhile (kernel.db)

    def ask(judgment: Judgment) -> tuple[int, dict[str, tuple[str, str, str]]]:
        match = judgment.match
        query = match.bracket.query
        assert match.left is not None and match.right is not None  # answered matches have both sides
        try:
            verdict = runner.pairwise(
                query=query.text,
                persona=persona_text(query.persona.as_dict()),
                summary_a=match.left.text,
                summary_b=match.right.text,
                both_orders=True,
            )
        except JudgeError as error:
            return match.pk, {order: ("", "", str(error)) for order in ("first", "swapped")}
        replies = (*verdict.replies, "", "")
        assert verdict.swapped is not None
        return match.pk, {
            "first": (_SIDE[verdict.first], replies[0], ""),
            "swapped": (_SIDE[verdict.swapped], replies[1], ""),
        }

    answers = map_concurrently(ask, judgments, concurrency=runner.concurrency)

    def store() -> int:
        for match_id, orders in answers:
            for order, (choice, reply, reason) in orders.items():
                key = {
                    "match_id": match_id,
                    "judge_model": judge["model"],
                    "judge_server": judge["server"],
                    "prompt_version": PROMPT_VERSIONS["pairwise"],
                    "order": order,
                }
                answer = {"choice": choice, "reply": reply[:4000], "reason": reason[:4000]}
                if choice:
                    PairwiseVote.objects.update_or_create(**key, defaults=answer)
                else:
                    # No usable answer this time: an answer this judge gave before is kept (as for scores), also
                    # one another run commits meanwhile: the update's own condition, checked on the committed row.
                    vote, created = PairwiseVote.objects.get_or_create(**key, defaults=answer)
                    if not created:
                        PairwiseVote.objects.filter(pk=vote.pk, choice="").update(**answer, computed_at=timezone.now())
        return len(answers)

    return store


def scoring_run_mark_failed(*, run_id: int, reason: str) -> None:
    ScoringRun.objects.filter(pk=run_id).exclude(status=ScoringRun.Status.DONE).update(
        status=ScoringRun.Status.FAILED, error=reason[:4000], finished_at=timezone.now(), lease_expires_at=None
    )


def scoring_runs_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The sweeper: a running run that no chunk has renewed within its lease has its unfinished chunks
    sent again (a chunk already counted is skipped), or fails after MAX_RESTARTS restarts in a row with no
    chunk counted in between. A run left running with no lease (started before leases existed) counts too."""
    now = now or timezone.now()
    restarted = failed = 0
    broker_started = broker_started_at()
    if broker_restarted(name="scoring", started=broker_started):
        # Chunks waiting in a broker that restarted are lost. A run no chunk is running for (its lease is the
        # waiting window, not a heartbeat's) is given a heartbeat's lease: it lapses by the next sweeps, which
        # send its chunks again; a run with a chunk running keeps the lease that chunk renews.
        ScoringRun.objects.filter(
            status=ScoringRun.Status.RUNNING, created_at__lt=broker_started, lease_expires_at__gt=now + _lease()
        ).update(lease_expires_at=now + _lease())
    with transaction.atomic():
        for run in ScoringRun.objects.select_for_update(skip_locked=True).filter(
            Q(lease_expires_at__lt=now) | Q(lease_expires_at__isnull=True, created_at__lt=now - requeue_window()),
            status=ScoringRun.Status.RUNNING,
        ):
            # Only the chunks already sent: the rest follow as these are counted.
            missing = [i for i in range(_sent(run)) if i not in run.chunks_done]
            if run.restarts >= MAX_RESTARTS or not missing:
                scoring_run_mark_failed(
                    run_id=run.pk,
                    reason=f"The workers scoring this run stopped: {run.done} of {run.total} candidates scored "
                    f"after {run.restarts} restarts. Start a new run.",
                )
                failed += 1
                continue
            ScoringRun.objects.filter(pk=run.pk).update(
                restarts=run.restarts + 1, lease_expires_at=now + requeue_window()
            )
            _send_chunks(run=run, indexes=missing)
            restarted += 1
    if restarted or failed:
        logger.warning("sweeper: %d scoring run(s) restarted, %d failed", restarted, failed)
    return {"scoring_runs_restarted": restarted, "scoring_runs_failed": failed}
