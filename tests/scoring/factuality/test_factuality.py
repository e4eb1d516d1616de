"""Seed 003's six factuality metrics on tiny random-weight models built here: loading, refusals, batching,
chunking, windowing, aggregation, and exact values recomputed from the models' own outputs with plain torch."""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import require

require(
    all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "tokenizers")),
    "the 'embeddings' extra (torch, transformers) is not installed",
)

import torch  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
)

from scoring.core import hf_models  # noqa: E402
from scoring.core.api import score_rows  # noqa: E402
from scoring.core.longdoc import TfidfEmbedder  # noqa: E402
from scoring.core.windowed import WindowedMetrics  # noqa: E402
from scoring.stress.runner import CoreMetrics  # noqa: E402
from tests.scoring.factuality.tiny import build_bart, build_classifier, build_t5, words_of  # noqa: E402

SOURCE = [
    "The captain found an old ship on the planet.",
    "The crew left the ship and came back home.",
    "A dog ran in the park with the cat.",
    "The woman sat on the mat and was happy.",
]
SUMMARY = ["The crew found an old ship.", "The cat sat on the mat."]
EDGES, WEIGHT, BIAS = [0.0, 0.3, 0.33, 0.36, 1.0], [0.5, -1.0, 2.0, 3.0], 0.25
HEAD = {"bin_edges": EDGES, "weight": WEIGHT, "bias": BIAS}
NLI_LABELS = ("entailment", "neutral", "contradiction")
ALL_SIX = ["bartscore", "minicheck", "summac_conv", "summac_zs", "alignscore", "unieval"]


def _story_words() -> list[str]:
    from scoring.stress.datasets import squality_rows

    try:
        rows = squality_rows(1)
    except Exception:  # the shared data is optional here; the end-to-end test asks for it itself
        return []
    return words_of([rows[0]["summary"], rows[0]["source"]])


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The six metrics' folders under one METRICS_WEIGHTS_DIR; MiniCheck as its Flan-T5 form."""
    folder = tmp_path_factory.mktemp("weights")
    words = sorted(set(words_of([*SOURCE, *SUMMARY]) + _story_words()))
    build_classifier(folder / "summac", words, labels=NLI_LABELS, seed=1)
    (folder / "summac_conv").mkdir()
    (folder / "summac_conv" / "summac_conv_head.json").write_text(json.dumps(HEAD))
    build_bart(folder / "bartscore", words, seed=2)
    build_t5(folder / "minicheck", words, seed=3)
    build_classifier(folder / "alignscore", words, labels=("aligned", "contradiction", "neutral"), seed=4)
    build_t5(folder / "unieval", words, seed=5)
    hf_models.forget_loaded()
    hf_models.configure(weights_dir=folder, device="cpu", batch_size=4)
    yield folder
    hf_models.forget_loaded()
    hf_models.configure()


def _row(summary: list[str] = SUMMARY, source: list[str] = SOURCE) -> dict[str, Any]:
    return {"id": "r", "summary": " ".join(summary), "source": " ".join(source)}


def _score(metric: str, row: dict[str, Any]) -> float:
    (out,) = score_rows([row], [metric])
    assert out["errors"] == {}, out["errors"]
    return float(out[metric])


def _classifier(folder: Path) -> tuple[Any, Any]:
    return AutoTokenizer.from_pretrained(folder), AutoModelForSequenceClassification.from_pretrained(folder).eval()


def _seq2seq(folder: Path) -> tuple[Any, Any]:
    return AutoTokenizer.from_pretrained(folder), AutoModelForSeq2SeqLM.from_pretrained(folder).eval()


def _pair_probs(folder: Path, premise: str, hypothesis: str) -> torch.Tensor:
    tok, model = _classifier(folder)
    with torch.no_grad():
        return torch.softmax(model(**tok(premise, hypothesis, return_tensors="pt")).logits[0], dim=-1)


def _pack(sentences: list[str], budget: int) -> list[str]:
    """Greedy in-order packing by word-level token count (the tiny tokenizers are word-level)."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for s in sentences:
        n = len(words_of([s]))
        if current and used + n > budget:
            chunks.append(" ".join(current))
            current, used = [], 0
        current.append(s)
        used += n
    return chunks + ([" ".join(current)] if current else [])


# -- refusals ---------------------------------------------------------------------------


def test_missing_weights_are_refused_naming_metric_setting_and_hub_id(weights: Path, tmp_path: Path) -> None:
    hf_models.configure(weights_dir=tmp_path, device="cpu")
    try:
        (out,) = score_rows([_row()], ALL_SIX)
    finally:
        hf_models.configure(weights_dir=weights, device="cpu", batch_size=4)
    assert all(out[m] is None for m in ALL_SIX)
    zs = out["errors"]["summac_zs"]
    assert "SummaC-ZS" in zs and "METRICS_WEIGHTS_DIR" in zs and str(tmp_path) in zs
    assert "https://huggingface.co/tals/albert-xlarge-vitaminc-mnli" in zs and "hf download" in zs
    assert "facebook/bart-large-cnn" in out["errors"]["bartscore"]
    assert "MingZhong/unieval-fact" in out["errors"]["unieval"]
    assert "lytang/MiniCheck-Flan-T5-Large" in out["errors"]["minicheck"]


def test_summac_conv_without_its_head_names_the_head_file(weights: Path, tmp_path: Path) -> None:
    (tmp_path / "summac").symlink_to(weights / "summac")
    hf_models.configure(weights_dir=tmp_path, device="cpu")
    try:
        (out,) = score_rows([_row()], ["summac_conv", "summac_zs"])
    finally:
        hf_models.configure(weights_dir=weights, device="cpu", batch_size=4)
    assert out["summac_zs"] is not None
    assert "summac_conv_head.json" in out["errors"]["summac_conv"]
    assert "tingofurro/summac" in out["errors"]["summac_conv"]


# -- exact values -----------------------------------------------------------------------


def test_summac_zs_is_entailment_minus_contradiction_max_over_chunks_mean_over_sentences(weights: Path) -> None:
    expected = []
    for hypothesis in SUMMARY:
        cells = []
        for premise in SOURCE:
            p = _pair_probs(weights / "summac", premise, hypothesis)
            cells.append(float(p[NLI_LABELS.index("entailment")] - p[NLI_LABELS.index("contradiction")]))
        expected.append(max(cells))
    assert _score("summac_zs", _row()) == pytest.approx(float(np.mean(expected)), abs=1e-5)


def test_summac_conv_applies_the_head_to_the_entailment_histogram(weights: Path) -> None:
    expected = []
    for hypothesis in SUMMARY:
        entail = [float(_pair_probs(weights / "summac", p, hypothesis)[0]) for p in SOURCE]
        counts, _ = np.histogram(np.clip(entail, 0.0, 1.0), bins=EDGES)
        expected.append(float(np.dot(WEIGHT, counts / len(SOURCE)) + BIAS))
    assert _score("summac_conv", _row()) == pytest.approx(float(np.mean(expected)), abs=1e-5)


def _bart_mean_loglik(folder: Path, source: str, summary: str) -> float:
    tok, model = _seq2seq(folder)
    src = tok(source, return_tensors="pt")
    labels = tok(summary, return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(**src, labels=labels).logits
    return float(torch.log_softmax(logits, dim=-1)[0].gather(-1, labels[0].unsqueeze(-1)).mean())


def test_bartscore_is_the_mean_token_log_likelihood(weights: Path) -> None:
    row = _row()
    expected = _bart_mean_loglik(weights / "bartscore", row["source"], row["summary"])
    assert expected < 0
    assert _score("bartscore", row) == pytest.approx(expected, abs=1e-5)


def test_bartscore_cuts_a_source_longer_than_the_window_and_keeps_the_best_chunk(weights: Path) -> None:
    long_source = [f"{s[:-1]} number {i}." for i in range(12) for s in SOURCE]  # ~500 tokens, 128 positions
    chunks = _pack(long_source, 126)
    assert len(chunks) >= 4
    row = _row(source=long_source)
    expected = max(_bart_mean_loglik(weights / "bartscore", c, row["summary"]) for c in chunks)
    assert _score("bartscore", row) == pytest.approx(expected, abs=1e-5)


def _first_step(folder: Path, text: str, words: tuple[str, str]) -> float:
    tok, model = _seq2seq(folder)
    ids = [tok(w, add_special_tokens=False).input_ids[0] for w in words]
    with torch.no_grad():
        logits = model(**tok(text, return_tensors="pt"), decoder_input_ids=torch.tensor([[0]])).logits[0, 0]
    p = torch.softmax(logits, dim=-1)
    return float(p[ids[0]] / (p[ids[0]] + p[ids[1]]))


def test_unieval_is_the_yes_probability_of_the_boolean_question_mean_over_sentences(weights: Path) -> None:
    document = " ".join(SOURCE)
    expected = [
        _first_step(
            weights / "unieval",
            f"question: Is this claim consistent with the document? </s> claim: {s} </s> document: {document}",
            ("Yes", "No"),
        )
        for s in SUMMARY
    ]
    assert _score("unieval", _row()) == pytest.approx(float(np.mean(expected)), abs=1e-5)


def test_minicheck_flan_t5_reads_the_answer_tokens_1_and_0(weights: Path) -> None:
    document = " ".join(SOURCE)
    expected = [_first_step(weights / "minicheck", f"premise: {document} hypothesis: {s}", ("1", "0")) for s in SUMMARY]
    assert _score("minicheck", _row()) == pytest.approx(float(np.mean(expected)), abs=1e-5)


def test_alignscore_takes_the_aligned_probability_max_over_350_token_chunks(weights: Path) -> None:
    long_source = [f"{s[:-1]} in year {i}." for i in range(10) for s in SOURCE]
    chunks = _pack(long_source, 120)  # 350 tokens, capped by the tiny model's 128 positions
    assert len(chunks) >= 3
    expected = [max(float(_pair_probs(weights / "alignscore", c, s)[0]) for c in chunks) for s in SUMMARY]
    assert _score("alignscore", _row(source=long_source)) == pytest.approx(float(np.mean(expected)), abs=1e-5)


# -- batching ---------------------------------------------------------------------------


def test_pairs_go_through_the_model_in_batches_and_batching_does_not_change_scores(weights: Path) -> None:
    rows = [_row(), {**_row(), "id": "b", "summary": "The dog ran in the park."}, {**_row(), "id": "c"}]
    hf_models.configure(weights_dir=weights, device="cpu", batch_size=1)
    one_by_one = [r["summac_zs"] for r in score_rows(rows, ["summac_zs"])]
    hf_models.configure(weights_dir=weights, device="cpu", batch_size=5)
    model = hf_models.load_classifier(hf_models.resolve_weights("summac_zs", "SummaC-ZS", "x", folder="summac"))
    sizes: list[int] = []
    handle = model.model.register_forward_pre_hook(
        lambda _m, args, kwargs: sizes.append(len(kwargs["input_ids"])), with_kwargs=True
    )
    try:
        batched = [r["summac_zs"] for r in score_rows(rows, ["summac_zs"])]
    finally:
        handle.remove()
        hf_models.configure(weights_dir=weights, device="cpu", batch_size=4)
    # 3 summary sentences x 4 source sentences, the identical rows' pairs sent once: 12 pairs in 5, 5, 2
    assert sizes == [5, 5, 2]
    assert batched == pytest.approx(one_by_one, abs=1e-5)
    assert batched[0] == batched[2]


def test_a_row_without_sentences_fails_alone(weights: Path) -> None:
    out = score_rows([_row(), {"id": "empty", "summary": "   ", "source": " ".join(SOURCE)}], ["summac_zs"])
    assert out[0]["summac_zs"] is not None and out[0]["errors"] == {}
    assert out[1]["summac_zs"] is None and "summary" in out[1]["errors"]["summac_zs"]


# -- windowing --------------------------------------------------------------------------


def test_window_scoring_takes_the_best_snippet_per_sentence_and_the_mean_over_sentences(weights: Path) -> None:
    source = [*SOURCE, "The old captain came back to the ship.", "They found a dog on the planet."]
    summary = [SOURCE[1], SOURCE[3]]  # copies: retrieved as the top sentence, widened by one each side
    suite = WindowedMetrics(CoreMetrics(), window=1, top_k=1, embedder=TfidfEmbedder())
    (out,) = suite.score([{"id": "w", "summary": " ".join(summary), "source": " ".join(source)}], ["summac_zs"])
    expected = []
    for claim, centre in ((summary[0], 1), (summary[1], 3)):
        snippet = source[centre - 1 : centre + 2]
        cells = [_pair_probs(weights / "summac", premise, claim) for premise in snippet]
        expected.append(max(float(p[0] - p[2]) for p in cells))
    assert out["errors"] == {}
    assert out["summac_zs"] == pytest.approx(float(np.mean(expected)), abs=1e-5)


# -- the seed's layout, end to end ------------------------------------------------------


def test_seed_layout_command_on_a_squality_story(weights: Path, tmp_path: Path, shared_data: Path, capsys) -> None:
    from scoring.seed_layout import main

    out = tmp_path / "seed003"
    argv = ["--dataset", "squality", "--limit", "1", "--embedder", "tfidf", "--out", str(out),
            "--weights-dir", str(weights), "--device", "cpu", "--batch-size", "32"]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr()
    table = (out / "table.txt").read_text()
    assert table.strip() == printed.out.split("\nwritten:")[0].strip()
    assert "sentence embedder tfidf" in table and "WARNING: The sentence embedder is TF-IDF" in table
    assert "warning:" in printed.err
    result = json.loads((out / "seed_layout.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert result["metrics"] == ALL_SIX and result["windows"] == [0, 1, 2]
    for metric in ALL_SIX:
        means = result["window_means"][metric]
        assert len(means) == 3 and all(isinstance(v, float) and math.isfinite(v) for v in means), metric
        line = next(x for x in table.splitlines() if x.startswith(f"{metric} "))
        assert len(line.split()) == 4  # the sweep table: the name and three window means
        # the original texts are scored at w=1 for the perturbation table: the same numbers as the sweep's w=1
        assert result["original_means"][metric] == pytest.approx(means[1], abs=1e-9)
        assert result["mean_abs_change"][metric]["added_source_text"] >= 0.0
        assert manifest["weights"][metric]["location"].startswith(str(weights))
    assert manifest["embedder"]["name"] == "tfidf" and manifest["device"] == "cpu"
    assert manifest["perturbations"] == ["added_source_text"] and manifest["n_documents"] == 1
    assert manifest["weights"]["summac_conv"]["conv_head"].endswith("summac_conv_head.json")
    # wider windows give NLI-style metrics more premises to take the max over: never a lower SummaC-ZS
    zs = result["window_means"]["summac_zs"]
    assert zs[0] <= zs[1] + 1e-6 and zs[1] <= zs[2] + 1e-6


def test_seed_layout_command_refuses_bad_options(tmp_path: Path, capsys) -> None:
    from scoring.seed_layout import main

    with pytest.raises(SystemExit):
        main(["--dataset", "squality", "--out", str(tmp_path), "--windows", "0,-1"])
    assert "--windows" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["--input", str(tmp_path / "rows.jsonl"), "--out", str(tmp_path / "file")]) == 2
    assert "--out" in capsys.readouterr().err
    assert main(["--input", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "rows.jsonl").write_text(json.dumps(_row()) + "\n")
    assert main(["--input", str(tmp_path / "rows.jsonl"), "--metrics", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "unknown metric 'nope'" in capsys.readouterr().err
