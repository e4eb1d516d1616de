"""The fault suite: each test causes one fault for real (a real Celery worker, PostgreSQL and Redis)
and asserts what the annotator sees and what is stored. Scenarios live in tests/faults/scenarios.py,
shared with bench/faults.py; a failure prints the scenario's full report."""

from __future__ import annotations

import pytest

from tests.faults import scenarios
from tests.faults.scenarios import Outcome, Rig
from tests.support.redis_server import RedisServer

pytestmark = [pytest.mark.worker, pytest.mark.timeout(240)]


def check(outcome: Outcome) -> None:
    print(outcome.report())
    if outcome.problems or (outcome.stuck, outcome.lost, outcome.duplicated) != (0, 0, 0):
        pytest.fail(outcome.report(), pytrace=False)


def test_a_worker_killed_mid_retrieval_leaves_no_query_retrieving(rig: Rig) -> None:
    check(scenarios.kill_mid_retrieval(rig))


@pytest.mark.parametrize("pool", ["prefork", "threads"])
def test_a_worker_killed_mid_generation_has_its_candidates_finished_within_a_minute(rig: Rig, pool: str) -> None:
    check(scenarios.kill_mid_generation(rig, pool=pool))


def test_a_worker_killed_with_retries_waiting_has_them_sent_again_within_a_minute_of_its_restart(rig: Rig) -> None:
    check(scenarios.kill_with_retries_waiting(rig))


def test_a_worker_killed_mid_scoring_leaves_the_run_ended_and_counted_once(rig: Rig) -> None:
    check(scenarios.kill_mid_scoring(rig))


def test_a_worker_killed_mid_export_leaves_the_research_job_ended(rig: Rig) -> None:
    check(scenarios.kill_mid_export(rig))


@pytest.mark.parametrize("via", ["api", "page"])
def test_the_broker_unreachable_at_submit_gives_a_clear_message_and_loses_nothing(rig: Rig, via: str) -> None:
    check(scenarios.broker_down_at_submit(rig, via=via))


@pytest.mark.parametrize("hangs", [4, 40], ids=["first-attempts-hang", "every-attempt-hangs"])
def test_an_llm_hanging_past_the_soft_time_limit_is_retried(rig: Rig, hangs: int) -> None:
    check(scenarios.llm_hangs_past_soft_limit(rig, hangs=hangs))


def test_concurrent_first_round_answers_give_every_bracket_its_final(rig: Rig) -> None:
    check(scenarios.concurrent_first_round(rig, brackets=50))


def test_a_stale_second_tab_is_told_the_match_was_already_answered(rig: Rig) -> None:
    check(scenarios.stale_tab(rig))


@pytest.mark.browser
@pytest.mark.parametrize(
    ("second_after_ms", "on"), [(30, "same"), (100, "next")], ids=["presses-30ms-apart", "press-100ms-into-next-match"]
)
def test_a_double_key_press_answers_one_match(browser_rig: Rig, second_after_ms: int, on: str) -> None:
    check(scenarios.double_key_press(browser_rig, second_after_ms=second_after_ms, on=on))


@pytest.mark.parametrize("kind", ["settings-list", "stray-brace"])
def test_an_exception_in_the_background_ends_failed_and_the_annotator_can_finish(rig: Rig, kind: str) -> None:
    check(scenarios.exception_in_background(rig, kind=kind))


def test_a_broker_restart_mid_generation_loses_no_summary_and_every_question_becomes_ready(
    restart_rig: Rig, own_redis: RedisServer
) -> None:
    check(scenarios.broker_restart_mid_generation(restart_rig, own_redis))


def test_a_broker_restart_with_research_queued_sends_it_again_and_it_ends_once(
    restart_rig: Rig, own_redis: RedisServer
) -> None:
    check(scenarios.broker_restart_with_research_queued(restart_rig, own_redis))


def test_sending_again_work_that_was_merely_queued_is_harmless(rig: Rig) -> None:
    check(scenarios.resend_while_queued(rig))


def test_a_question_whose_summaries_all_failed_says_so_in_the_api_and_try_again_recovers_it(rig: Rig) -> None:
    check(scenarios.try_again_after_failure(rig))
