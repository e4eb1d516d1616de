"""Judges as part of a score's identity, and the pairwise judge over a study's real matches.

Two OpenAI-compatible stand-in servers play two judges with scripted answer policies, so what each
judge stores, and how much it agrees with the annotators, is known by construction.
"""

from __future__ import annotations

import io
import re
import shutil
from typing import Any

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from analysis.report import render_html
from analysis.selectors import comparison_frame, comparison_rows
from analysis.services import analysis_config_for
from analysis.stats import analyze
from annotation.models import Candidate, Judgment
from kernel.exceptions import ApplicationError
from scoring.core.judges import judge_column
from scoring.models import CandidateScore, PairwiseVote, ScoringRun
from scoring.services import pairwise_run_start, scoring_run_start
from tests.analysis.conftest import played_study  # noqa: F401 - the fixture: a study with real answers
from tests.support.openai_standin import openai_standin

pytestmark = pytest.mark.django_db

PAIR = re.compile(r"Summary A:\n(.*?)\n\nSummary B:\n(.*?)\n\nWhich summary", re.S)
ONE = re.compile(r"Summary:\n(.*?)\n\nEvaluation criterion", re.S)


def _user(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def rate_by_length(body: dict[str, Any]) -> str:
    """Judge A: 1-5 by the summary's length in words (longer is better)."""
    match = ONE.search(_user(body))
    assert match is not None
    return str(min(5, 1 + len(match.group(1).split()) // 25))


def rate_by_letters(body: dict[str, Any]) -> str:
    """Judge B: 1-5 by the count of the letter e, a rating unrelated to judge A's."""
    match = ONE.search(_user(body))
    assert match is not None
    return str(1 + match.group(1).count("e") % 5)


def prefer_longer(body: dict[str, Any]) -> str:
    match = PAIR.search(_user(body))
    assert match is not None
    a, b = len(match.group(1).split()), len(match.group(2).split())
    return "A" if a > b else "B" if b > a else "Neither"


def always_a(body: dict[str, Any]) -> str:
    return "A"


@pytest.fixture(autouse=True)
def _judge_cache(tmp_path, monkeypatch, settings):
    monkeypatch.setenv("JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))
    for name in ("JUDGE_BASE_URL", "JUDGE_MODEL", "JUDGE_NAME"):
        monkeypatch.delenv(name, raising=False)
        setattr(settings, name, "")  # the deployment's judge (config/settings/base.py): none


def test_two_judges_scores_coexist_and_each_is_a_family(played_study, django_capture_on_commit_callbacks):  # noqa: F811
    with openai_standin(rate_by_length) as a, openai_standin(rate_by_letters) as b:
        for server, name in ((a, "judge-a"), (b, "")):
            with django_capture_on_commit_callbacks(execute=True):
                run = scoring_run_start(
                    study=played_study,
                    metrics=["geval_fluency"],
                    judge={"model": "standin-model", "base_url": server.base_url, "name": name},
                )
            run.refresh_from_db()
            assert run.status == ScoringRun.Status.DONE, run.error
    server_b = b.base_url.split("//")[1].split("/")[0]  # host:port, the server's label without a name
    candidates = Candidate.objects.filter(query__participation__study=played_study, status="done")
    scores = CandidateScore.objects.filter(metric="geval_fluency")
    assert scores.count() == 2 * candidates.count()
    assert set(scores.values_list("judge_server", flat=True)) == {"judge-a", server_b}
    assert set(scores.values_list("prompt_version", flat=True)) == {"rubric/1"}
    # Each judge's scores are its own policy's ratings of the candidate's text.
    for score in scores.select_related("candidate"):
        words, es = len(score.candidate.text.split()), score.candidate.text.count("e")
        expected = min(5, 1 + words // 25) if score.judge_server == "judge-a" else 1 + es % 5
        assert score.value == expected
        # The judge is in the version too, so a rescoring of one judge never replaces the other's.
        assert score.version.endswith(f"; judge standin-model@{score.judge_server}")
    col_a = judge_column("geval_fluency", "standin-model@judge-a")
    col_b = judge_column("geval_fluency", f"standin-model@{server_b}")
    assert col_a == "judge:standin-model@judge-a:rubric/1:geval_fluency"
    frame = comparison_frame(study=played_study)
    assert {f"left__{col_a}", f"right__{col_b}"} <= set(frame.columns)
    report = analyze(frame, config=analysis_config_for(frame, seed=1, n_resamples=50))
    assert report.agreement is not None
    families = {m.metric: m.family for m in report.agreement.metrics}
    assert families == {col_a: "llm_judge:standin-model@judge-a", col_b: f"llm_judge:standin-model@{server_b}"}
    assert len(report.agreement.families) == 2
    # The report's family table has one row per judge, as the source paper's tables do.
    html = render_html(report)
    family_table = html[html.index('<th class="l">family</th>') :].split("</table>")[0]
    rows = re.findall(r'<tr><td class="l">([^<]*)</td><td class="">(\d+)</td>', family_table)
    assert sorted(rows) == sorted(
        [("llm_judge:standin-model@judge-a", "1"), (f"llm_judge:standin-model@{server_b}", "1")]
    )


def test_judge_settings_are_checked(played_study):  # noqa: F811
    with pytest.raises(ApplicationError) as error:
        scoring_run_start(study=played_study, metrics=["geval_fluency"], judge={"model": "m", "base_url": "ftp://x"})
    assert error.value.field == "judge" and "http" in error.value.message
    with pytest.raises(ApplicationError, match="JUDGE_API_KEY"):
        pairwise_run_start(study=played_study, judge={"model": "m", "base_url": "http://user:secret@host/v1"})
    with pytest.raises(ApplicationError, match="at most 100 characters"):
        pairwise_run_start(study=played_study, judge={"model": "m" * 101, "base_url": "http://host/v1"})
    with pytest.raises(ApplicationError, match="Unknown judge settings: api_key"):
        pairwise_run_start(study=played_study, judge={"model": "m", "base_url": "http://host/v1", "api_key": "k"})
    with pytest.raises(ApplicationError, match="Configure a judge"):
        pairwise_run_start(study=played_study)
    assert not ScoringRun.objects.exists()


def _human_codes(rows: list[dict[str, Any]]) -> list[float]:
    return [{"left": 0.0, "right": 1.0, "neither": 2.0}[r["choice"]] for r in rows]


def test_the_deployments_judge_gets_its_key_which_no_run_stores(
    played_study,  # noqa: F811
    django_capture_on_commit_callbacks,
    settings,
):
    # A run that names no judge takes the deployment's (JUDGE_* settings); the key goes to the judge's server
    # with every request and is in none of the run's stored fields or votes.
    with openai_standin(prefer_longer) as server:
        settings.JUDGE_BASE_URL, settings.JUDGE_MODEL = server.base_url, "standin-model"
        settings.JUDGE_NAME, settings.JUDGE_API_KEY = "lab-judge", "sk-judge-key-4711"
        with django_capture_on_commit_callbacks(execute=True):
            run = pairwise_run_start(study=played_study)
        run.refresh_from_db()
        assert run.status == ScoringRun.Status.DONE, run.error
        assert server.headers and {h["authorization"] for h in server.headers} == {"Bearer sk-judge-key-4711"}
    assert run.options["judge"] == {"model": "standin-model", "base_url": server.base_url, "server": "lab-judge"}
    stored = [run.options, run.error, *PairwiseVote.objects.values_list("judge_model", "judge_server", "reason")]
    assert "sk-judge-key-4711" not in repr(stored)


def test_pairwise_judge_over_real_matches_in_both_orders(played_study, django_capture_on_commit_callbacks):  # noqa: F811
    with openai_standin(prefer_longer) as fair, openai_standin(always_a) as biased:
        for server, name in ((fair, "fair"), (biased, "biased")):
            with django_capture_on_commit_callbacks(execute=True):
                run = pairwise_run_start(
                    study=played_study, judge={"model": "standin-model", "base_url": server.base_url, "name": name}
                )
            run.refresh_from_db()
            assert run.status == ScoringRun.Status.DONE and run.done == Judgment.objects.count(), run.error
        # Every match asked in the order shown and swapped (a prompt already answered may come from the
        # judge's cache, so the pairs asked are compared, not the number of calls).
        pairs = {
            pair
            for j in Judgment.objects.select_related("match__left", "match__right")
            for pair in ((j.match.left.text, j.match.right.text), (j.match.right.text, j.match.left.text))
        }
        for server in (fair, biased):
            asked = {m.groups() for m in (PAIR.search(_user(b)) for b in server.requests) if m}
            assert asked == {(a.strip(), b.strip()) for a, b in pairs}
    assert PairwiseVote.objects.count() == 2 * 2 * Judgment.objects.count()
    # The position-biased judge says A every time: left as shown, right when swapped.
    biased_votes = PairwiseVote.objects.filter(judge_server="biased")
    assert set(biased_votes.filter(order="first").values_list("choice", flat=True)) == {"left"}
    assert set(biased_votes.filter(order="swapped").values_list("choice", flat=True)) == {"right"}

    rows = comparison_rows(study=played_study)
    human = _human_codes(rows)
    longer = []
    for r in rows:
        left = len(Candidate.objects.get(pk=r["left_candidate"]).text.split())
        right = len(Candidate.objects.get(pk=r["right_candidate"]).text.split())
        longer.append(0.0 if left > right else 1.0 if right > left else 2.0)
    expected = krippendorff.alpha(reliability_data=[longer, human], level_of_measurement="nominal")

    frame = comparison_frame(study=played_study)
    report = analyze(frame, config=analysis_config_for(frame, seed=3, n_resamples=200))
    agreement = report.agreement
    assert agreement is not None
    fair_vote = agreement.get(judge_column("pairwise", "standin-model@fair"))
    assert fair_vote.alpha == pytest.approx(expected)
    assert fair_vote.threshold == 0.0 and fair_vote.threshold_rule == "vote"
    assert fair_vote.n_units == len(rows) and np.isfinite(fair_vote.ci_low)
    assert fair_vote.family == "llm_judge:standin-model@fair"
    consistency = {c.judge: c.rate for c in agreement.position_consistency}
    assert consistency == {"standin-model@fair": 1.0, "standin-model@biased": 0.0}
    # Combined, the biased judge always says neither: it agrees only where the annotators said neither.
    biased = agreement.get(judge_column("pairwise", "standin-model@biased"))
    assert biased.metric_neither == 1.0
    assert biased.raw_agreement == pytest.approx(np.mean(np.asarray(human) == 2.0))
    # Judge votes are not swept: they have no threshold to choose.
    assert not any(s.metric.startswith("judge:") for s in report.threshold_sweeps)


def test_score_study_command_runs_the_pairwise_judge(played_study, django_capture_on_commit_callbacks):  # noqa: F811
    out = io.StringIO()
    with openai_standin(prefer_longer) as server, django_capture_on_commit_callbacks(execute=True):
        call_command(
            "score_study",
            "--study",
            played_study.slug,
            "--pairwise",
            "--judge-model",
            "standin-model",
            "--judge-base-url",
            server.base_url,
            "--judge-name",
            "cli-judge",
            stdout=out,
        )
    assert set(PairwiseVote.objects.values_list("judge_server", flat=True)) == {"cli-judge"}
    assert PairwiseVote.objects.count() == 2 * Judgment.objects.count()
    with pytest.raises(CommandError, match="--metrics"):
        call_command("score_study", "--study", played_study.slug)


def _score_study_pairwise(study, callbacks, *flags: str) -> None:
    with callbacks(execute=True):
        call_command("score_study", "--study", study.slug, "--pairwise", *flags, stdout=io.StringIO())


@pytest.mark.parametrize(
    ("environment", "flags", "judge"),
    [
        # The model from the flag, the server and the name from the environment.
        ({"JUDGE_NAME": "env-judge"}, ("--judge-model", "cli-model"), ("cli-model", "env-judge")),
        # The name alone from the flag: the environment's judge, under that name.
        (
            {"JUDGE_MODEL": "env-model", "JUDGE_NAME": "env-judge"},
            ("--judge-name", "cli-judge"),
            ("env-model", "cli-judge"),
        ),
    ],
    ids=["model-flag", "name-flag-alone"],
)
def test_score_study_takes_each_judge_field_not_given_from_its_variable(
    played_study,  # noqa: F811
    django_capture_on_commit_callbacks,
    settings,
    environment,
    flags,
    judge,
):
    with openai_standin(prefer_longer) as server:
        settings.JUDGE_BASE_URL = server.base_url
        for name, value in environment.items():
            setattr(settings, name, value)
        _score_study_pairwise(played_study, django_capture_on_commit_callbacks, *flags)
    assert set(PairwiseVote.objects.values_list("judge_model", "judge_server")) == {judge}
    assert PairwiseVote.objects.count() == 2 * Judgment.objects.count()


def test_score_study_names_the_judge_setting_still_missing(played_study, settings):  # noqa: F811
    settings.JUDGE_MODEL = "env-model"
    with pytest.raises(CommandError, match=r"--judge-base-url or JUDGE_BASE_URL"):
        call_command("score_study", "--study", played_study.slug, "--pairwise", "--judge-name", "cli-judge")
    assert not ScoringRun.objects.exists()


@pytest.mark.django_db(transaction=True)  # --now runs the chunks as its commit's callbacks, before it prints
def test_score_study_says_how_many_values_a_missing_judge_left_empty(played_study, monkeypatch):  # noqa: F811
    for name in ("JUDGE_MODEL", "JUDGE_BASE_URL", "JUDGE_NAME"):
        monkeypatch.delenv(name, raising=False)
    out = io.StringIO()
    call_command("score_study", "--study", played_study.slug, "--metrics", "geval_overall,rouge1", "--now", stdout=out)
    candidates = Candidate.objects.filter(query__participation__study=played_study).count()
    lines = out.getvalue().splitlines()
    assert lines[0] == f"Scored {candidates} of {candidates} candidates with geval_overall, rouge1."
    # Every judge value is empty (no judge configured), every ROUGE value is there.
    assert lines[1].startswith(f"{candidates} values could not be computed (e.g. ") and "judge" in lines[1]


@pytest.mark.django_db(transaction=True)  # --now runs the chunks as its commit's callbacks, before it prints
def test_score_study_says_how_many_pairwise_votes_a_failing_judge_left_empty(played_study):  # noqa: F811
    out = io.StringIO()
    with openai_standin(lambda body: "I cannot compare these summaries.") as server:
        call_command(
            "score_study",
            "--study",
            played_study.slug,
            "--pairwise",
            "--now",
            "--judge-model",
            "standin-model",
            "--judge-base-url",
            server.base_url,
            stdout=out,
        )
    matches = Judgment.objects.filter(match__bracket__query__participation__study=played_study).count()
    lines = out.getvalue().splitlines()
    assert lines[0] == f"Scored {matches} of {matches} matches with pairwise judge."
    # The judge answered, but never with A, B or Neither: no vote was usable, and the command says so.
    assert PairwiseVote.objects.filter(choice="").count() == 2 * matches
    assert (
        lines[1].startswith(f"{2 * matches} of {2 * matches} votes have no answer (e.g. ") and "unparseable" in lines[1]
    )


def test_a_rerun_whose_judge_fails_keeps_the_scores_it_had(played_study, django_capture_on_commit_callbacks, tmp_path):  # noqa: F811
    # A researcher adds ROUGE to a study already rated by judge A; this time the run lands on a worker
    # whose judge cache is empty, and the judge's server, restarted with another template, no longer
    # answers with a rating. The ratings judge A gave before are still the study's.
    broken = {"on": False}

    def judge(body: dict[str, Any]) -> str:
        return "I would rather not rate this summary." if broken["on"] else rate_by_length(body)

    with openai_standin(judge) as server:
        settings = {"model": "standin-model", "base_url": server.base_url, "name": "judge-a"}
        with django_capture_on_commit_callbacks(execute=True):
            scoring_run_start(study=played_study, metrics=["geval_fluency"], judge=settings)
        rated = dict(CandidateScore.objects.filter(metric="geval_fluency").values_list("candidate_id", "value"))
        assert rated and None not in rated.values()
        broken["on"] = True
        shutil.rmtree(tmp_path / "judge-cache")
        with django_capture_on_commit_callbacks(execute=True):
            run = scoring_run_start(study=played_study, metrics=["geval_fluency", "rouge1"], judge=settings)
    run.refresh_from_db()
    assert run.status == ScoringRun.Status.DONE, run.error
    assert dict(CandidateScore.objects.filter(metric="geval_fluency").values_list("candidate_id", "value")) == rated
    assert CandidateScore.objects.filter(metric="rouge1", value__isnull=False).count() == len(rated)


def test_a_pairwise_rerun_whose_judge_fails_keeps_the_votes_it_had(
    played_study,  # noqa: F811
    django_capture_on_commit_callbacks,
    tmp_path,
):
    broken = {"on": False}

    def judge(body: dict[str, Any]) -> str:
        return "Both are fine, really." if broken["on"] else prefer_longer(body)

    with openai_standin(judge) as server:
        settings = {"model": "standin-model", "base_url": server.base_url, "name": "judge-a"}
        with django_capture_on_commit_callbacks(execute=True):
            pairwise_run_start(study=played_study, judge=settings)
        votes = set(PairwiseVote.objects.values_list("match_id", "order", "choice"))
        assert len(votes) == 2 * Judgment.objects.count() and "" not in {choice for *_, choice in votes}
        broken["on"] = True
        shutil.rmtree(tmp_path / "judge-cache")
        with django_capture_on_commit_callbacks(execute=True):
            pairwise_run_start(study=played_study, judge=settings)
    assert set(PairwiseVote.objects.values_list("match_id", "order", "choice")) == votes


def test_a_judge_reply_over_the_cap_leaves_the_vote_empty_saying_which_cap(
    played_study,  # noqa: F811
    small_reply_caps,
    django_capture_on_commit_callbacks,
):
    # The judge's server answers every vote with a body that never ends: each call reads 64 KiB of it and hangs
    # up, and every vote is stored empty with the reason, naming the cap and the setting that raises it.
    with openai_standin(script=["flood"] * 100) as server, django_capture_on_commit_callbacks(execute=True):
        settings = {"model": "standin-model", "base_url": server.base_url, "name": "judge-a"}
        pairwise_run_start(study=played_study, judge=settings)
    assert server.script.hung_up.is_set()
    votes = list(PairwiseVote.objects.values_list("choice", "reason"))
    assert len(votes) == 2 * Judgment.objects.filter(match__bracket__query__participation__study=played_study).count()
    assert server.completions <= len(votes)  # at most one call per vote: none retried (the judge retries 3 times)
    for choice, reason in votes:
        assert choice == ""
        assert f"judge call to standin-model failed: the reply from {server.base_url} was larger than 64 KiB" in reason
        assert "MODEL_SERVER_MAX_RESPONSE_BYTES" in reason
