"""Researcher jobs: exports, analysis reports, stress tests and sample-size plans of a study, run in the
background."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from analysis.community_exports import export_community
from analysis.exports import export_comparisons, export_summaries
from analysis.models import ResearchJob
from analysis.selectors import analysis_frame, exclusion_reasons, summary_frame
from analysis.stats.analyze import analyze
from analysis.stats.config import DEFAULT_RESAMPLES, DEFAULT_SEED, AnalysisConfig  # one default for every way in
from analysis.stats.power import PowerPlan, plan_power
from analysis.texts import with_texts
from annotation.models import Candidate, Participation
from generation.settings import configure_model_servers
from kernel import leases
from kernel.exceptions import ApplicationError
from kernel.heartbeat import heartbeat
from kernel.storable import json_problem
from kernel.storage import StorageUnavailable, storage_reasons
from kernel.tasks import enqueue_on_commit, lost_if_sent_before
from kernel.yielding import research_pause
from scoring.inputs import candidate_rows
from scoring.stress.perturb import TESTS, TestKind
from scoring.stress.runner import run_stress
from studies.models import Study
from studies.models_audit import AuditEvent, AuditOrigin
from studies.services.audit import audit_record

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # starts of a job: a worker that died, or a try the research storage failed (StorageTryAgain)
# The job's task, sent by the name it is registered and routed under (analysis/tasks.py imports this module,
# so this module names the task rather than import it: kernel/tasks.py).
RUN_RESEARCH_JOB = "analysis.tasks.run_research_job"


def requeue_queued_after() -> timedelta:
    """A queued job's message is sent again this often when the broker cannot say it lost it
    (SWEEP_REQUEUE_QUEUED_AFTER_S); sent before the broker last started, at the next sweep."""
    return timedelta(seconds=settings.SWEEP_REQUEUE_QUEUED_AFTER_S)


def _lease() -> timedelta:
    return timedelta(seconds=settings.BACKGROUND_LEASE_S)


EXPORT_FORMATS = ("csv", "jsonl", "parquet")
# The comparison table as a Hugging Face dataset folder (Parquet, dataset card, Croissant metadata:
# analysis.community_exports, docs/analysis.md), as `export_comparisons --hf` writes it.
HF_FORMAT = "hf"
# What an export job writes: the comparison table, or the summary table (one row per candidate, how it was
# generated: docs/comparison-table.md, "The summary table"), which the exclusion rule does not apply to.
EXPORT_TABLES = ("comparisons", "summaries")


def job_dir(job: ResearchJob) -> Path:
    """Where the local default storage keeps a job's files (the folder of its storage keys under MEDIA_ROOT)."""
    return Path(settings.MEDIA_ROOT) / "research" / f"job-{job.pk}"


def research_storage() -> Storage:
    """The storage research outputs live in (STORAGES["research"]: MEDIA_ROOT, or S3-compatible)."""
    return storages["research"]


def job_file_key(job_id: int, name: str) -> str:
    """The storage key of one output file of a job (`name` relative to the job's folder)."""
    return f"research/job-{job_id}/{name}"


def stored_keys(storage: Storage, folder: str) -> list[str]:
    """Every key under `folder` in the storage (a local folder or an S3 prefix), depth first."""
    try:
        folders, names = storage.listdir(folder)
    except FileNotFoundError:
        return []
    keys = [f"{folder}/{name}" for name in names]
    for sub in folders:
        keys += stored_keys(storage, f"{folder}/{sub}")
    return keys


class StorageTryAgain(Exception):
    """Attempt `attempt` of a job met a transient fault of the research storage (`reason`); its task tries again
    later or gives up (analysis/tasks.py)."""

    def __init__(self, *, attempt: int, reason: str) -> None:
        super().__init__(reason)
        self.attempt = attempt
        self.reason = reason


def _publish(job: ResearchJob, out: Path, files: list[str]) -> None:
    """Upload a job's files from the worker's folder into the research storage, replacing a rerun's; what an
    earlier attempt left there and this one did not write again is deleted. A fault of the store is raised as
    `StorageUnavailable` with its reason."""
    storage = research_storage()
    with storage_reasons(storage, then="then run the job again"):
        for name in files:
            key = job_file_key(job.pk, name)
            # A rerun's file goes first: a local folder would save the new one under another name. Deleting a key
            # that is not there is no error, in a folder or a bucket.
            storage.delete(key)
            with (out / name).open("rb") as fh:
                saved = storage.save(key, File(fh, name=Path(name).name))
            if saved != key:  # a storage that renamed the file would break the download link
                raise RuntimeError(f"the research storage saved {key!r} as {saved!r}")
        wanted = {job_file_key(job.pk, name) for name in files}
        for key in stored_keys(storage, f"research/job-{job.pk}"):
            if key not in wanted:
                storage.delete(key)


def research_storage_sweep() -> dict[str, int]:
    """Delete the stored files no job lists: those of deleted jobs (a job or its study deleted in the admin),
    and those a failed attempt uploaded before it failed. Run hourly by the beat process."""
    storage = research_storage()
    try:
        folders, _ = storage.listdir("research")
    except FileNotFoundError:
        return {"research_files_deleted": 0}
    ids = {int(f.removeprefix("job-")) for f in folders if f.startswith("job-") and f[4:].isdigit()}
    # One read of the jobs: with two (the files kept, then the jobs still active) a job that finished between
    # them was taken for done with the files it listed while running (none), and its outputs were deleted.
    jobs = list(ResearchJob.objects.filter(pk__in=ids).values_list("pk", "status", "files"))
    # A queued or running job may be uploading right now; its files are settled when it finishes.
    active = {pk for pk, status, _ in jobs if status in (ResearchJob.Status.QUEUED, ResearchJob.Status.RUNNING)}
    kept = {pk: files for pk, status, files in jobs if status == ResearchJob.Status.DONE}
    deleted = 0
    for pk in sorted(ids - active):
        wanted = {job_file_key(pk, name) for name in kept.get(pk, [])}
        for key in stored_keys(storage, f"research/job-{pk}"):
            if key not in wanted:
                storage.delete(key)
                deleted += 1
    if deleted:
        logger.info("research storage: deleted %s file(s) no job lists", deleted)
    return {"research_files_deleted": deleted}


# A research job's stress test runs without a rewriter model, so the tests whose perturbations a language model
# writes cannot run as a job (docs/stress-tests.md: run them from the command line with a model server).
NEEDS_MODEL = (
    "needs a language model server to rewrite the summaries, which research jobs do not use: "
    "run it from the command line with a model server (see docs/stress-tests.md)"
)


def stress_tests_blocked() -> dict[str, str]:
    """Every stress test, with why it cannot run as a research job ("" when it can)."""
    return {name: NEEDS_MODEL if spec.kind is TestKind.LLM else "" for name, spec in TESTS.items()}


def _validate(kind: str, options: dict[str, Any]) -> dict[str, Any]:
    # Stored as jsonb, whoever starts the job (the research page passes its form's values as they came): no
    # NUL or lone surrogate in a string or key, no infinity, no runaway nesting.
    if problem := json_problem(options, where="options"):
        raise ApplicationError(f"{problem[0].upper()}{problem[1:]}.", field="options")
    options = dict(options)
    if kind == ResearchJob.Kind.EXPORT:
        fmt = options.setdefault("format", "csv")
        if fmt not in (*EXPORT_FORMATS, HF_FORMAT):
            raise ApplicationError(
                f"Export format must be one of {', '.join((*EXPORT_FORMATS, HF_FORMAT))}.", field="format"
            )
        # Off by default: queries, personas and summaries are participants' text, for a released dataset only.
        if not isinstance(options.setdefault("include_texts", False), bool):
            raise ApplicationError("include_texts must be true or false.", field="include_texts")
        if options.setdefault("table", "comparisons") not in EXPORT_TABLES:
            raise ApplicationError(f"table must be one of {', '.join(EXPORT_TABLES)}.", field="table")
        if options["table"] == "summaries" and fmt == HF_FORMAT:
            raise ApplicationError(
                "The Hugging Face dataset holds the comparison table: export the summary table as "
                f"{', '.join(EXPORT_FORMATS)}.",
                field="format",
            )
        if options["table"] == "summaries" and "exclude" in options:
            raise ApplicationError(
                "The summary table has a row for every summary: the exclusion rule applies to the comparisons only.",
                field="exclude",
            )
    elif kind == ResearchJob.Kind.REPORT:
        resamples = options.setdefault("n_resamples", DEFAULT_RESAMPLES)
        if not _whole(resamples) or not 1 <= resamples <= 100_000:
            raise ApplicationError("Resamples must be a whole number between 1 and 100000.", field="n_resamples")
        # Analysis settings (AnalysisConfig fields, as in `analyze --config`), checked here as the worker will
        # check them, so that a wrong one is a 400 naming it rather than a failed job.
        config = options.get("config", {})
        if not isinstance(config, dict):
            raise ApplicationError("config must be an object of analysis settings.", field="config")
        if twice := sorted({"seed", "n_resamples"} & set(config)):
            raise ApplicationError(
                f"Give {' and '.join(twice)} as an option of the job, not in config.", field="config"
            )
        try:
            AnalysisConfig.from_dict(config)
        except ValueError as exc:
            raise ApplicationError(f"config: {exc}.", field="config") from exc
    elif kind == ResearchJob.Kind.STRESS:
        tests = options.get("tests") or []
        if not _texts(tests):
            raise ApplicationError(f"tests must be a list of names among: {', '.join(TESTS)}.", field="tests")
        unknown = sorted(set(tests) - set(TESTS))
        if not tests or unknown:
            raise ApplicationError(
                f"Choose stress tests from: {', '.join(TESTS)}"
                + (f" (unknown: {', '.join(unknown)})" if unknown else ""),
                field="tests",
            )
        blocked = stress_tests_blocked()
        refused = [name for name in tests if blocked[name]]
        if refused:
            raise ApplicationError(
                f"The stress test{'s' if len(refused) > 1 else ''} {', '.join(refused)} {NEEDS_MODEL}. "
                "Choose among the other tests.",
                field="tests",
            )
        metrics = options.get("metrics")
        if not metrics:
            raise ApplicationError("Choose at least one metric.", field="metrics")
        if not _texts(metrics):
            raise ApplicationError("metrics must be a list of metric names.", field="metrics")
        # The stress runner's names: the suite's metrics, or "offline" / "all" (docs/stress-tests.md).
        from scoring.core.api import metric_specs  # the metric suite: rouge-score, nltk, scikit-learn

        try:
            metric_specs([m for m in metrics if m not in ("offline", "all")])
        except ValueError as error:
            raise ApplicationError(f"{str(error).capitalize()}.", field="metrics") from error
        limit = options.get("limit")
        if limit is not None and (not _whole(limit) or limit < 1):
            raise ApplicationError("The number of summaries must be a whole number, at least 1.", field="limit")
    elif kind == ResearchJob.Kind.PLAN:
        _validate_plan(options)
    else:
        raise ApplicationError(f"Unknown job kind {kind!r}.", field="kind")
    seed = options.setdefault("seed", DEFAULT_SEED)
    if not _whole(seed) or seed < 0:
        raise ApplicationError("The seed must be a non-negative whole number.", field="seed")
    return options


# A sample-size plan's settings (analysis.stats.power, `manage.py plan_study`): default, and the range allowed.
PLAN_DEFAULTS: dict[str, Any] = {
    "sizes": [10, 20, 40, 80], "target": 0.8, "alpha": 0.05, "taste_sd": 0.5, "questions": 8, "reps": 200,
    "resamples": 999,
}  # fmt: skip
PLAN_RANGES: dict[str, tuple[float, float, str]] = {
    "effect": (-5.0, 5.0, "The persona effect (log-odds)"),
    "target": (0.01, 0.99, "The target power"),
    "alpha": (0.001, 0.5, "The significance level"),
    "taste_sd": (0.0, 5.0, "The annotators' taste SD (log-odds)"),
    "questions": (1, 100, "Questions per annotator"),
    "reps": (10, 5_000, "Simulated studies per size"),
    "resamples": (99, 9_999, "Bootstrap resamples"),
}
PLAN_MAX_SIZES = 12


def _validate_plan(options: dict[str, Any]) -> None:
    if "effect" not in options:
        raise ApplicationError(
            "Give the persona effect you expect, in log-odds (0.4 is about 60% wins).", field="effect"
        )
    for name, default in PLAN_DEFAULTS.items():
        options.setdefault(name, default)
    for name, (low, high, label) in PLAN_RANGES.items():
        value = options[name]
        whole = isinstance(low, int)
        if (whole and not _whole(value)) or (not whole and not _number(value)) or not low <= value <= high:
            kind = "a whole number" if whole else "a number"
            raise ApplicationError(f"{label} must be {kind} between {low:g} and {high:g}.", field=name)
    sizes = options["sizes"]
    if (
        not isinstance(sizes, list)
        or not 1 <= len(sizes) <= PLAN_MAX_SIZES
        or not all(_whole(size) and 2 <= size <= 2_000 for size in sizes)
    ):
        raise ApplicationError(
            f"Give 1 to {PLAN_MAX_SIZES} numbers of annotators to try, each between 2 and 2000 (e.g. 10, 20, 40).",
            field="sizes",
        )
    options["sizes"] = sorted(set(sizes))


def _number(value: Any) -> bool:
    """A JSON number (whole or not, never a boolean)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(value: Any) -> bool:
    """A JSON whole number (``true`` is not one, though Python counts it as the integer 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def research_job_start(
    *,
    study: Study,
    kind: str,
    options: dict[str, Any] | None = None,
    by: Any = None,
    origin: str = AuditOrigin.CODE,
) -> ResearchJob:
    """Queue a research job; the same job asked for again while it is queued or running is that job
    (`research_job_request`)."""
    job, _ = research_job_request(study=study, kind=kind, options=options, by=by, origin=origin)
    return job


@transaction.atomic
def research_job_request(
    *,
    study: Study,
    kind: str,
    options: dict[str, Any] | None = None,
    by: Any = None,
    origin: str = AuditOrigin.CODE,
) -> tuple[ResearchJob, bool]:
    """(the job, whether it was created). A job the same person asked for with the same options (after the
    defaults and the exclusion rule are resolved), still queued or running, is returned instead of a second
    one: a double click, a form sent again or a script's retry after a timeout costs one run. The study's row
    is locked while this looks, so two requests at the same moment make one job (no annotator statement locks
    it). A finished or failed job is not reused: asking again runs it again."""
    options = _validate(kind, options or {})
    if kind == ResearchJob.Kind.REPORT or (kind == ResearchJob.Kind.EXPORT and options["table"] == "comparisons"):
        # The rule is resolved now (the study's default when none is asked for) and kept with the job.
        exclude = options.get("exclude")
        if exclude is not None and not isinstance(exclude, str | list):
            raise ApplicationError("exclude must be a comma-separated text or a list of reasons.", field="exclude")
        options["exclude"] = list(exclusion_reasons(study=study, exclude=exclude))
    creator = by if by is not None and getattr(by, "is_authenticated", False) else None
    Study.objects.select_for_update().filter(pk=study.pk).values_list("pk").first()
    active = study.research_jobs.filter(
        kind=kind, created_by=creator, status__in=[ResearchJob.Status.QUEUED, ResearchJob.Status.RUNNING]
    ).order_by("created_at")
    # Compared here, not in SQL: jsonb equality holds on PostgreSQL, SQLite compares the JSON text.
    if same := next((job for job in active if job.options == options), None):
        return same, False
    job = ResearchJob.objects.create(
        study=study,
        kind=kind,
        options=options,
        created_by=creator,
        queued_at=timezone.now(),
    )
    audit_record(
        study=study,
        by=by,
        origin=origin,
        event_type=AuditEvent.RESEARCH_JOB_STARTED,
        object_type="research job",
        object_id=job.pk,
        object_repr=f"{kind} job {job.pk}",
        after={"kind": kind, "options": options},
    )
    _job_send(job_id=job.pk)
    return job, True


def _job_send(*, job_id: int) -> None:
    """Send the job once the transaction commits. A send the broker refuses (it is down or restarting) leaves
    the job queued with no send time (`queued_at` empty): the next sweep sends it again."""

    def unsent() -> None:
        ResearchJob.objects.filter(pk=job_id, status=ResearchJob.Status.QUEUED).update(queued_at=None)

    enqueue_on_commit(RUN_RESEARCH_JOB, job_id, on_send_failed=unsent)


def _progress(job: ResearchJob, percent: int, stage: str, pause: Callable[[], None] | None = None) -> None:
    """Record a stage; between stages the job makes way for annotator work on this host (kernel/yielding.py)."""
    if pause is not None:
        pause()
    ResearchJob.objects.filter(pk=job.pk).update(progress=max(0, min(100, percent)), stage=stage[:200])


def research_job_claim(*, job_id: int, redelivered: bool = False) -> ResearchJob | None:
    """Move a job to running under a fresh lease; None when it is finished or a live worker holds it.
    A job whose worker died (lease expired, or the broker redelivered it) restarts from scratch, up to
    MAX_ATTEMPTS; past that it fails with the reason."""
    now = timezone.now()
    claimable = leases.claimable(
        queued=ResearchJob.Status.QUEUED, running=ResearchJob.Status.RUNNING, now=now, redelivered=redelivered
    )
    with transaction.atomic():
        job = ResearchJob.objects.select_for_update().select_related("study").filter(claimable, pk=job_id).first()
        if job is None:
            return None
        if job.attempts >= MAX_ATTEMPTS:
            research_job_mark_failed(
                job_id=job.pk, reason=f"The worker running this job stopped {job.attempts} times; gave up."
            )
            return None
        job.status, job.attempts, job.lease_expires_at = ResearchJob.Status.RUNNING, job.attempts + 1, now + _lease()
        job.progress, job.stage, job.error = 1, "starting" if job.attempts == 1 else "restarting", ""
        job.save(update_fields=["status", "attempts", "lease_expires_at", "progress", "stage", "error"])
    return job


def research_job_lease_renew(*, job_id: int, attempt: int) -> None:
    ResearchJob.objects.filter(pk=job_id, status=ResearchJob.Status.RUNNING, attempts=attempt).update(
        lease_expires_at=timezone.now() + _lease()
    )


def research_job_mark_failed(*, job_id: int, reason: str) -> None:
    # Only a job still under way: a job cancelled while its worker ran keeps "Cancelled by ..." when that
    # worker's run then fails, and a finished job its outcome.
    ResearchJob.objects.filter(pk=job_id, status__in=[ResearchJob.Status.QUEUED, ResearchJob.Status.RUNNING]).update(
        status=ResearchJob.Status.FAILED, error=reason[:4000], finished_at=timezone.now(), lease_expires_at=None
    )


@transaction.atomic
def research_job_cancel(*, job: ResearchJob, by: Any, origin: str = AuditOrigin.CODE) -> ResearchJob:
    """The way out of a job that waits (no worker serves the research queue) or runs longer than wanted: it
    fails now with who cancelled it. A worker that takes it later finds it finished (research_job_claim), and
    one already running it writes nothing more over it (its updates need the job running). A finished job is
    left as it is, so cancelling twice, or after the end, changes nothing."""
    name = getattr(by, "get_username", lambda: "")() or "someone"
    active = [ResearchJob.Status.QUEUED, ResearchJob.Status.RUNNING]
    was = ResearchJob.objects.select_for_update().filter(pk=job.pk, status__in=active).values("status", "stage").first()
    ResearchJob.objects.filter(pk=job.pk, status__in=active).update(
        status=ResearchJob.Status.FAILED,
        error=f"Cancelled by {name}.",
        stage="cancelled",
        finished_at=timezone.now(),
        lease_expires_at=None,
    )
    job.refresh_from_db()
    if was is not None:
        audit_record(
            study=job.study,
            by=by,
            origin=origin,
            event_type=AuditEvent.RESEARCH_JOB_CANCELLED,
            object_type="research job",
            object_id=job.pk,
            object_repr=f"{job.kind} job {job.pk}",
            before=was,
            after={"status": job.status, "stage": job.stage},
        )
    return job


@transaction.atomic
def research_job_file_downloaded(*, job_id: int, name: str, by: Any, origin: str) -> None:
    """Record that someone downloaded (or opened) one of a job's files: exported data leaving the platform."""
    job = ResearchJob.objects.select_related("study").get(pk=job_id)
    audit_record(
        study=job.study,
        by=by,
        origin=origin,
        event_type=AuditEvent.JOB_FILE_DOWNLOADED,
        object_type="research job",
        object_id=job.pk,
        object_repr=f"{job.kind} job {job.pk}",
        after={"file": name},
    )


def research_job_run(*, job_id: int, redelivered: bool = False) -> ResearchJob:
    """Run a job to completion; a failure is stored with its reason and never leaves files half-listed.
    A job that was running when its worker died starts again from scratch, in a new scratch folder; its files
    are uploaded to the research storage before the job is marked done."""
    job = research_job_claim(job_id=job_id, redelivered=redelivered)
    if job is None:
        return ResearchJob.objects.get(pk=job_id)
    # The worker's own scratch folder: the files reach the web servers through the research storage.
    out = Path(tempfile.mkdtemp(prefix=f"research-job-{job.pk}-"))
    attempt = job.attempts
    files: list[str] = []
    pause = research_pause()
    try_again: StorageTryAgain | None = None
    try:
        runner = {
            ResearchJob.Kind.EXPORT: _run_export,
            ResearchJob.Kind.REPORT: _run_report,
            ResearchJob.Kind.STRESS: _run_stress,
            ResearchJob.Kind.PLAN: _run_plan,
        }[ResearchJob.Kind(job.kind)]
        with heartbeat(
            lambda: research_job_lease_renew(job_id=job_id, attempt=attempt),
            every=settings.BACKGROUND_HEARTBEAT_S,
            name=f"lease of research job {job_id}",
        ):
            manifest = runner(job, out, pause)
            files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
            # Said while it lasts: a store that hangs holds the job here, for its time-outs (docs/deploy.md).
            _progress(job, 95, f"uploading {len(files)} file{'s' if len(files) != 1 else ''} to the research storage")
            _publish(job, out, files)
    except StorageUnavailable as error:
        # The log keeps botocore's own words (the endpoint's address among them); the researcher gets the reason.
        logger.warning("research job %s: the research storage failed: %r", job.pk, error.__cause__)
        if error.transient:
            try_again = StorageTryAgain(attempt=attempt, reason=error.message)
        else:
            research_job_mark_failed(job_id=job.pk, reason=error.message)
    except Exception as error:  # stored for the researcher; the task's on_failure covers the rest
        logger.exception("research job %s failed", job.pk)
        message = error.message if isinstance(error, ApplicationError) else f"{type(error).__name__}: {error}"
        research_job_mark_failed(job_id=job.pk, reason=message)
    else:
        ResearchJob.objects.filter(pk=job.pk, status=ResearchJob.Status.RUNNING, attempts=attempt).update(
            status=ResearchJob.Status.DONE,
            progress=100,
            stage="done",
            files=files,
            manifest=manifest,
            finished_at=timezone.now(),
            lease_expires_at=None,
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
        if pause.pauses:
            logger.info(
                "research job %s paused %d times, %.2f s in all, for annotator work", job.pk, pause.pauses,
                pause.paused_s,
            )  # fmt: skip
    if try_again is not None:
        raise try_again
    job.refresh_from_db()
    return job


def research_job_retry_later(*, job_id: int, attempt: int, reason: str, seconds: float) -> bool:
    """Hold a job whose try the research storage failed until its task tries again in `seconds`: still running, its
    lease covering the wait (the sweeper leaves it alone; the retry claims it as the lease lapses), the reason
    shown. False when the job is no longer this try's (cancelled meanwhile)."""
    held = ResearchJob.objects.filter(pk=job_id, status=ResearchJob.Status.RUNNING, attempts=attempt).update(
        lease_expires_at=timezone.now() + timedelta(seconds=seconds),
        stage=f"try {attempt} of {MAX_ATTEMPTS} failed; trying again in {seconds:g} s",
        error=reason[:4000],
    )
    return bool(held)


def research_job_give_up(*, job_id: int, attempt: int, reason: str) -> None:
    """The last try the research storage failed: the job fails with the reason of the last one."""
    research_job_mark_failed(
        job_id=job_id, reason=f"Gave up after {attempt} tries. {reason} Once it works again, run the job again."
    )


def research_jobs_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The sweeper: a running job whose lease expired (its worker died) is queued and sent again, or
    failed once its attempts are spent; a queued job whose message may be lost (sent before the broker
    last started, or `requeue_queued_after()` ago) is sent again, stamped. A message that was only waiting
    finds the job claimed (research_job_claim)."""
    now = now or timezone.now()
    lost_before = lost_if_sent_before(window=requeue_queued_after(), now=now)
    with transaction.atomic():
        due = ResearchJob.objects.select_for_update(skip_locked=True).filter(
            Q(status=ResearchJob.Status.RUNNING, lease_expires_at__lt=now)
            # Running with no lease: a job started before leases existed, whose worker is long gone.
            | Q(
                status=ResearchJob.Status.RUNNING,
                lease_expires_at__isnull=True,
                created_at__lt=now - requeue_queued_after(),
            )
            | Q(status=ResearchJob.Status.QUEUED, queued_at__lt=lost_before)
            | Q(status=ResearchJob.Status.QUEUED, queued_at__isnull=True)
        )
        due_ids = list(due.values_list("pk", flat=True))
        ResearchJob.objects.filter(pk__in=due_ids).update(
            status=ResearchJob.Status.QUEUED, queued_at=now, lease_expires_at=None, stage="waiting for a worker"
        )
        for job_id in due_ids:
            _job_send(job_id=job_id)
    if due_ids:
        logger.warning("sweeper: research job(s) %s sent again", due_ids)
    return {"research_jobs_requeued": len(due_ids)}


def _run_export(job: ResearchJob, out: Path, pause: Callable[[], None]) -> dict[str, Any]:
    if job.options.get("table") == "summaries":
        _progress(job, 10, "reading summaries", pause)
        summaries = summary_frame(study=job.study, include_texts=bool(job.options.get("include_texts")))
        _progress(job, 60, f"writing {len(summaries)} rows", pause)
        formats = [job.options["format"]]
        return export_summaries(summaries, out, formats=formats, study=job.study.slug).to_dict()
    _progress(job, 10, "reading comparisons", pause)
    frame, exclusion = analysis_frame(study=job.study, exclude=job.options.get("exclude"))
    if job.options.get("include_texts"):
        frame = with_texts(frame, study=job.study)
    _progress(job, 60, f"writing {len(frame)} rows", pause)
    if job.options["format"] == HF_FORMAT:
        # data/train.parquet, README.md (the dataset card) and croissant.json: a folder load_dataset reads.
        return export_community(frame, out, study=job.study.slug, exclusion=exclusion.to_dict(), filters={}).to_dict()
    manifest = export_comparisons(
        frame,
        out,
        formats=[job.options["format"]],
        study=job.study.slug,
        filters={},
        seed=job.options.get("seed"),
        exclusion=exclusion.to_dict(),
    )
    return manifest.to_dict()


def analysis_config_for(frame: Any, *, seed: int, n_resamples: int, extra: dict[str, Any] | None = None) -> Any:
    # Families and directions come from the metric registry inside analyze(), the same lookup as the file path.
    # from_dict names an unknown setting (a typo), where the constructor's TypeError named Python's internals.
    return AnalysisConfig.from_dict({**(extra or {}), "seed": seed, "n_resamples": n_resamples})


def _run_report(job: ResearchJob, out: Path, pause: Callable[[], None]) -> dict[str, Any]:
    from analysis.report.bundle import write_analysis  # matplotlib: in the worker, not the web process

    _progress(job, 10, "reading comparisons", pause)
    frame, exclusion = analysis_frame(study=job.study, exclude=job.options.get("exclude"))
    if frame.empty:
        raise ApplicationError(
            "This study has no answered comparisons yet."
            if not exclusion.total_comparisons
            else f"The exclusion rule ({exclusion.rule}) left no comparisons to analyse."
        )
    _progress(job, 30, f"analysing {len(frame)} comparisons", pause)
    config = analysis_config_for(
        frame, seed=job.options["seed"], n_resamples=job.options["n_resamples"], extra=job.options.get("config")
    )
    report = analyze(frame, config=config, exclusion=exclusion)
    _progress(job, 80, "writing the report", pause)
    # The same files as `manage.py analyze` and the command line: report, tables/*.csv, the exports.
    write_analysis(report, frame, out, title=f"{job.study.title}: analysis", study=job.study.slug)
    return {"provenance": report.to_dict().get("provenance", {}), "rows": len(frame), "exclusion": exclusion.to_dict()}


def _run_stress(job: ResearchJob, out: Path, pause: Callable[[], None]) -> dict[str, Any]:
    configure_model_servers()  # LLM rewrites and judges share the deployment's model-server limit and cache

    _progress(job, 5, "reading candidates", pause)
    candidates = (
        Candidate.objects.filter(query__participation__study=job.study, status=Candidate.Status.DONE)
        .exclude(query__participation__source=Participation.Source.PREVIEW)  # a preview is not data
        .select_related("query__persona")
        .prefetch_related("query__documents")
        .order_by("pk")
    )
    limit = job.options.get("limit")
    rows = candidate_rows(candidates[:limit] if limit else candidates)
    if not rows:
        raise ApplicationError("This study has no generated summaries yet.")

    def progress(stage: str, done: int, total: int) -> None:
        _progress(job, 5 + int(90 * done / max(total, 1)), stage, pause)

    report = run_stress(
        rows, job.options["tests"], job.options["metrics"], seed=job.options["seed"], out_dir=out, progress=progress
    )
    return {
        "rows": len(rows),
        "tests": job.options["tests"],
        "metrics": job.options["metrics"],
        "summary": str(report)[:2000],
    }


def _run_plan(job: ResearchJob, out: Path, pause: Callable[[], None]) -> dict[str, Any]:
    """The sample-size plan (analysis.stats.power; `manage.py plan_study` writes the same files)."""
    from analysis.report.power_plot import power_plot  # matplotlib: in the worker, not the web process

    options = job.options
    _progress(job, 5, f"simulating {options['reps']} studies at each of {len(options['sizes'])} sizes", pause)

    def progress(done: int, total: int) -> None:
        _progress(job, 5 + int(85 * done / total), f"simulated {done} of {total} sizes", pause)

    plan = plan_power(
        options["sizes"],
        effect=float(options["effect"]),
        target=float(options["target"]),
        taste_sd=float(options["taste_sd"]),
        queries=options["questions"],
        reps=options["reps"],
        alpha=float(options["alpha"]),
        resamples=options["resamples"],
        seed=options["seed"],
        progress=progress,
    )
    write_plan(plan, out, power_plot(plan))
    return {"recommended": plan.recommended, "summary": plan.summary()}


def write_plan(plan: PowerPlan, out: Path, svg: str) -> None:
    """plan.json, plan.svg and plan.txt in ``out``: the files of the research page's job and of `plan_study`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(plan.to_dict(), indent=2) + "\n", encoding="utf-8")
    (out / "plan.svg").write_text(svg, encoding="utf-8")
    (out / "plan.txt").write_text(plan.summary() + "\n", encoding="utf-8")
