import pytest

from modelserver import ChatClient, ChatConfig
from scoring.stress import run_stress
from scoring.stress.perturb import StressRow
from scoring.stress.rewrite import AUDIENCES, PROMPTS, SanityPolicy, llm_perturbation, rewrite_messages, sanity_checks
from scoring.stress.similarity import TfidfSimilarity
from tests.scoring.stress.support import ROWS, TinyMetrics
from tests.support.openai_standin import openai_standin

TFIDF = TfidfSimilarity()
ROW_OBJS = [StressRow.from_mapping(r) for r in ROWS[:3]]


def _summary_in(body):
    user = body["messages"][-1]["content"]
    return user.split("Summary:\n", 1)[1]


def echo(body):
    """A faithful rewriter: the summary itself, lightly reworded."""
    return "Here is the rewritten summary:\n" + _summary_in(body).replace("learn", "acquire")


def _client(server, tmp_path, **kw):
    return ChatClient(ChatConfig(base_url=server.base_url, model="standin-model", seed=0, **kw), cache_dir=tmp_path)


def test_lengthen_prompts_contain_the_summary_and_the_source(tmp_path):
    with openai_standin(echo) as server:
        pert, records = llm_perturbation("lengthen", ROW_OBJS, _client(server, tmp_path), similarity=TFIDF)
        bodies = list(server.requests)
    assert len(bodies) == 3 * len(ROW_OBJS)
    for row in ROW_OBJS:
        mine = [b for b in bodies if row.summary in b["messages"][-1]["content"]]
        assert len(mine) == 3
        assert all(row.source_sentences[0] in b["messages"][-1]["content"] for b in mine)
        assert {b["seed"] for b in mine} == {0}
    assert pert.levels == ("original", "x1.5", "x2", "x3")
    first = pert.variants[ROW_OBJS[0].id]
    assert first[0][0].text == ROW_OBJS[0].summary
    assert first[1][0].text == ROW_OBJS[0].summary.replace("learn", "acquire")  # preamble stripped
    assert all(r.prompt == "lengthen" and r.prompt_version == PROMPTS["lengthen"].version for r in records)


def test_cache_hit_makes_no_second_request(tmp_path):
    with openai_standin(echo) as server:
        _, first = llm_perturbation("paraphrased", ROW_OBJS, _client(server, tmp_path), similarity=TFIDF)
        sent = server.completions
        _, second = llm_perturbation("paraphrased", ROW_OBJS, _client(server, tmp_path), similarity=TFIDF)
        assert server.completions == sent == len(ROW_OBJS)
    assert not any(r.cached for r in first)
    assert all(r.cached for r in second)
    assert [r.text for r in first] == [r.text for r in second]


def test_sanity_check_flags_a_rewrite_that_drops_content(tmp_path):
    def lossy(body):
        words = _summary_in(body).split()
        return " ".join(words[:3]) + "."

    with openai_standin(lossy) as server:
        _, records = llm_perturbation("simplified", ROW_OBJS, _client(server, tmp_path), similarity=TFIDF)
    assert all(r.sanity is not None and r.sanity.flagged for r in records)
    assert any("content dropped" in reason for r in records for reason in r.sanity.reasons)

    with openai_standin(echo) as server:
        _, records = llm_perturbation("simplified", ROW_OBJS, _client(server, tmp_path / "b"), similarity=TFIDF)
    assert not any(r.sanity.flagged for r in records)


def test_sanity_check_flags_added_content_and_low_similarity():
    orig = ["Cats sleep most of the day in warm places."]
    padded = [orig[0] + " Dogs bark at night. Birds migrate south in winter. Fish swim in schools. " * 3]
    other = ["Quarterly revenue rose sharply in emerging markets."]
    (added,) = sanity_checks(orig, padded, [1.0], similarity=TFIDF, policy=SanityPolicy())
    assert added.flagged and "content added" in added.reasons[-1]
    (unrelated,) = sanity_checks(orig, other, [1.0], similarity=TFIDF, policy=SanityPolicy())
    assert unrelated.flagged and unrelated.similarity < 0.2
    (lengthened,) = sanity_checks(orig, [orig[0] + " " + orig[0]], [2.0], similarity=TFIDF, policy=SanityPolicy())
    assert not lengthened.flagged


def test_failed_rewrite_is_recorded_not_fatal(tmp_path):
    with openai_standin(echo, script=["400"]) as server:
        client = ChatClient(ChatConfig(base_url=server.base_url, model="standin-model", concurrency=1), tmp_path)
        pert, records = llm_perturbation("negated", ROW_OBJS, client, similarity=TFIDF)
    failed = [r for r in records if r.text is None]
    assert len(failed) == 1 and "400" in (failed[0].error or "")
    variant = pert.variants[failed[0].row_id][1][0]
    assert variant.text is None and "400" in variant.note["error"]


def test_an_empty_rewrite_is_asked_again_on_the_rerun(tmp_path):
    # The server answers nothing for the first round; the rerun, with the same cache, gets the rewrites.
    empty = {"on": True}
    with openai_standin(lambda body: "" if empty["on"] else echo(body)) as server:
        _, first = llm_perturbation("paraphrased", ROW_OBJS, _client(server, tmp_path), similarity=TFIDF)
        empty["on"] = False
        _, second = llm_perturbation("paraphrased", ROW_OBJS, _client(server, tmp_path), similarity=TFIDF)
        assert server.completions == 2 * len(ROW_OBJS)
    assert [r.error for r in first] == ["the model returned an empty rewrite"] * len(ROW_OBJS)
    assert [r.text for r in second] == [row.summary.replace("learn", "acquire") for row in ROW_OBJS]


def test_run_stress_with_llm_tests_against_the_standin(tmp_path):
    rows = [dict(r) for r in ROWS[:4]]
    rows[0]["persona"] = "Journalist at a science desk"
    with openai_standin(echo) as server:
        config = ChatConfig(base_url=server.base_url, model="standin-model")
        report = run_stress(rows, ["audience", "paraphrased"], ["overlap_f1", "constant"], seed=3,
                            judge_config=config, out_dir=tmp_path, backend=TinyMetrics(), similarity=TFIDF)  # fmt: skip
        assert all(b["seed"] == 3 for b in server.requests)
        # the journalist row gets no journalist rewrite
        assert server.completions == len(AUDIENCES) * 4 - 1 + 4
    audience = report.result("overlap_f1", "audience")
    assert audience.levels == ("original", "other audience")
    assert set(audience.extra["mean_by_audience"]) == set(AUDIENCES)
    assert audience.extra["rewrites"] == 11 and audience.extra["failed_rewrites"] == 0
    para = report.result("constant", "paraphrased")
    assert para.mean_abs_change == 0.0 and para.passed  # a stable two-level test judged by M
    assert report.provenance["prompt_versions"] == {"audience": 1, "paraphrased": 1}
    assert (tmp_path / "llm-cache").is_dir()
    assert "LLM rewrites" in (tmp_path / "report.html").read_text()


@pytest.mark.embeddings
def test_embedding_sanity_backend_when_available():
    pytest.importorskip("sentence_transformers")
    from scoring.stress.similarity import EmbeddingSimilarity

    sim = EmbeddingSimilarity.load()
    close, far = sim.pairwise(
        ["The model learns features from raw audio.", "The model learns features from raw audio."],
        ["Features are learned by the model from unprocessed audio.", "Stock prices fell on Tuesday."],
    )
    assert close > 0.6 > far


@pytest.mark.parametrize(
    ("summary", "target"),
    [
        ("Night shifts cut nurses' sleep by an hour and raised error rates on wards.", 7),  # 14 words
        ("夜班会减少护士的睡眠时间。疲劳的护士更容易出错！", 12),  # 12 + 1 + 10 + 1: a character or stop a word
    ],
)
def test_shorten_asks_for_half_the_words_counted_per_character_in_chinese(summary, target):
    messages = rewrite_messages("shorten", StressRow(id="r", summary=summary), {"factor": 0.5})
    assert f"Condense the summary below to about {target} words" in messages[-1]["content"]
