"""LLM judges against the local OpenAI-compatible stand-in: strict parsing, caching, usage, no-judge reasons."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modelserver import ChatConfig
from scoring.core.api import score_rows
from scoring.core.judges import JudgeError, JudgeRunner, parse_choice, parse_list, parse_rating
from tests.support.openai_standin import openai_standin

PERSONA = "Role: practising nurse. Expertise: intermediate. Use case: patient education."
QUERY = "Does early mobilisation after surgery reduce complications?"
SOURCE = "Early mobilisation after abdominal surgery reduced pneumonia rates in two randomised trials."
SUMMARY = "Early mobilisation lowers pneumonia after abdominal surgery. It was tested in trials."


def prompt_kind(body: dict[str, Any]) -> str:
    system = body["messages"][0]["content"]
    return system.split("]")[0].removeprefix("[evaluation prompt ").split("/")[0]


def user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def scripted(replies: dict[str, Callable[[dict[str, Any]], str] | str]) -> Callable[[dict[str, Any]], str]:
    def respond(body: dict[str, Any]) -> str:
        reply = replies[prompt_kind(body)]
        return reply(body) if callable(reply) else reply

    return respond


def runner(base_url: str, tmp_path: Path) -> JudgeRunner:
    return JudgeRunner(ChatConfig(base_url=base_url, model="standin-model", max_retries=0), cache_dir=tmp_path)


def row(**extra: str) -> dict[str, str]:
    return {"id": "r1", "summary": SUMMARY, "source": SOURCE, "query": QUERY, "persona": PERSONA, **extra}


def test_strict_parsers() -> None:
    assert parse_rating("4") == 4 and parse_rating(" Score: 5/5 ") == 5 and parse_rating("**3**.") == 3
    for bad in ("4 or 5", "about 4", "four", "6", "", "I would give it a 4"):
        with pytest.raises(JudgeError):
            parse_rating(bad)
    options = {"relevant": "relevant", "irrelevant": "irrelevant", "not relevant": "irrelevant"}
    assert parse_choice("Irrelevant.", options) == "irrelevant"
    assert parse_choice("Answer: relevant", options) == "relevant"
    for bad in ("This is relevant", "relevant, mostly", "irrelevant or relevant"):
        with pytest.raises(JudgeError, match="unparseable"):
            parse_choice(bad, options)
    assert parse_list("- one\n- two\n\n3. three") == ["one", "two", "three"]
    assert parse_list("NONE") == []
    with pytest.raises(JudgeError):
        parse_list("Here are the facts:\n- one")


def test_rubrics_through_score_rows_and_unparseable_reply_is_an_error(tmp_path: Path) -> None:
    def rubric(body: dict[str, Any]) -> str:
        text = user_text(body)
        if "Fluency:" in text:
            return "5"
        if "Consistency:" in text:
            return "Somewhere between 3 and 4"
        return "Score: 4"

    with openai_standin(scripted({"rubric": rubric, "persona-rubric": "2"})) as server:
        judge = runner(server.base_url, tmp_path)
        (out,) = score_rows(
            [row()], ["geval_fluency", "geval_relevance", "geval_consistency", "persona_relevance"], judge=judge
        )
    assert out["geval_fluency"] == 5.0 and out["geval_relevance"] == 4.0 and out["persona_relevance"] == 2.0
    assert out["geval_consistency"] is None
    assert "unparseable rating reply 'Somewhere between 3 and 4'" in out["errors"]["geval_consistency"]
    # The persona variant shows the judge the reader's profile and query; the generic one does not.
    persona_prompts = [b for b in server.requests if prompt_kind(b) == "persona-rubric"]
    generic_prompts = [b for b in server.requests if prompt_kind(b) == "rubric"]
    assert PERSONA in user_text(persona_prompts[0])
    assert all(PERSONA not in user_text(b) for b in generic_prompts)
    assert judge.usage.calls == 4 and judge.usage.prompt_tokens > 0 and judge.usage.completion_tokens > 0


def test_second_run_is_served_from_cache_without_http(tmp_path: Path) -> None:
    with openai_standin(scripted({"rubric": "3"})) as server:
        first = runner(server.base_url, tmp_path)
        score_rows([row()], ["geval_overall", "geval_coherence"], judge=first)
        assert server.completions == 2
        second = runner(server.base_url, tmp_path)
        (again,) = score_rows([row()], ["geval_overall", "geval_coherence"], judge=second)
        assert server.completions == 2  # no new request
    assert again["geval_overall"] == 3.0
    assert second.usage.calls == 2 and second.usage.cached_calls == 2 and second.usage.total_tokens == 0


def test_prompt_version_is_part_of_every_prompt(tmp_path: Path) -> None:
    with openai_standin(scripted({"rubric": "3"})) as server:
        runner(server.base_url, tmp_path).rubric("fluency", summary=SUMMARY)
    assert server.requests[0]["messages"][0]["content"].startswith("[evaluation prompt rubric/1]")


def test_persona_precision_reads_irrelevant_as_irrelevant(tmp_path: Path) -> None:
    facts = "- Early mobilisation lowers pneumonia.\n- It was tested in trials.\n- The hospital has a new logo."

    def relevance(body: dict[str, Any]) -> str:
        text = user_text(body)
        if "logo" in text:
            return "Irrelevant"
        if "trials" in text:
            return "irrelevant."
        return "Relevant"

    with openai_standin(scripted({"atomic-facts": facts, "persona-fact-relevance": relevance})) as server:
        result = runner(server.base_url, tmp_path).persona_precision(summary=SUMMARY, persona=PERSONA, query=QUERY)
    assert result.hits == (True, False, False)
    assert result.score == pytest.approx(1 / 3)
    assert result.usage.calls == 4


def test_persona_recall_and_factscore(tmp_path: Path) -> None:
    needs = "- whether mobilisation reduces pneumonia\n- how strong the evidence is\n- risks for frail patients"

    def coverage(body: dict[str, Any]) -> str:
        return "Not covered" if "frail" in user_text(body) else "Covered"

    def support(body: dict[str, Any]) -> str:
        return "Supported" if "pneumonia" in user_text(body).split("Statement:")[1] else "Not supported"

    replies = {
        "persona-needs": needs,
        "need-coverage": coverage,
        "atomic-facts": "- Mobilisation lowers pneumonia.\n- The trials enrolled 10,000 patients.",
        "fact-support": support,
    }
    with openai_standin(scripted(replies)) as server:
        (out,) = score_rows([row()], ["persona_recall", "factscore"], judge=runner(server.base_url, tmp_path))
    assert out["persona_recall"] == pytest.approx(2 / 3)
    assert out["factscore"] == pytest.approx(1 / 2)
    assert out["errors"] == {}


def test_factscore_with_unparseable_support_reply_is_an_error(tmp_path: Path) -> None:
    replies = {"atomic-facts": "- Mobilisation lowers pneumonia.", "fact-support": "Probably supported"}
    with openai_standin(scripted(replies)) as server:
        (out,) = score_rows([row()], ["factscore"], judge=runner(server.base_url, tmp_path))
    assert out["factscore"] is None
    assert "unparseable reply 'Probably supported'" in out["errors"]["factscore"]


def test_pairwise_judge_mirrors_the_annotator_choice(tmp_path: Path) -> None:
    def prefer_nurse_friendly(body: dict[str, Any]) -> str:
        text = user_text(body)
        a = text.split("Summary A:")[1].split("Summary B:")[0]
        return "A" if "pneumonia" in a else "B"

    with openai_standin(scripted({"pairwise": prefer_nurse_friendly})) as server:
        judge = runner(server.base_url, tmp_path)
        verdict = judge.pairwise(
            query=QUERY, persona=PERSONA, summary_a="Unrelated text.", summary_b=SUMMARY, both_orders=True
        )
    assert verdict.choice == "B" and verdict.consistent
    assert "better satisfies this person's information need" in user_text(server.requests[0])
    assert len(verdict.replies) == 2

    with openai_standin(scripted({"pairwise": "A"})) as server:  # position bias: always "A"
        biased = runner(server.base_url, tmp_path / "other").pairwise(
            query=QUERY, persona=PERSONA, summary_a="One.", summary_b="Two.", both_orders=True
        )
    assert biased.choice == "Neither" and not biased.consistent

    with openai_standin(scripted({"pairwise": "Summary B is better"})) as server:
        with pytest.raises(JudgeError, match="expected exactly one of A / B / Neither"):
            runner(server.base_url, tmp_path / "third").pairwise(
                query=QUERY, persona=PERSONA, summary_a="One.", summary_b="Two."
            )


def test_without_a_judge_llm_metrics_give_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("JUDGE_MODEL", raising=False)
    (out,) = score_rows([row()], ["geval_overall", "persona_precision", "rouge1"])
    assert out["geval_overall"] is None and "no LLM judge configured" in out["errors"]["geval_overall"]
    assert "no LLM judge configured" in out["errors"]["persona_precision"]
    assert out["errors"]["rouge1"] == "missing input: reference"


def test_judge_from_environment_and_server_failure_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_CACHE_DIR", str(tmp_path))
    with openai_standin(scripted({"rubric": "2"}), script=["401"]) as server:
        monkeypatch.setenv("JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("JUDGE_MODEL", "standin-model")
        first, second = score_rows([row(id="a"), row(id="b", summary="Another summary.")], ["geval_fluency"])
    failed, ok = (first, second) if first["geval_fluency"] is None else (second, first)
    assert ok["geval_fluency"] == 2.0
    assert "401" in failed["errors"]["geval_fluency"] and "API key" in failed["errors"]["geval_fluency"]
