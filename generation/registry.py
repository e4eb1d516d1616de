"""Backends by name, each given its configuration from Django settings (generation.settings). A backend with a
heavy dependency (the openai SDK, networkx, the corpus's index) is imported when a study first uses it, so a
process that never does (the web server of an offline study) does not load it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from generation.offline_summariser import STRATEGIES, ExtractiveSummariser
from generation.prewritten import PrewrittenOutputs
from generation.settings import configure_model_servers, corpus_root, model_servers_from_settings, openalex_retrieval
from kernel.backends import BackendError, GenerationBackend, RetrievalBackend

RETRIEVAL_BACKENDS = ("demo", "corpus", "openalex")
GENERATION_BACKENDS = ("extractive", "baseline", "openai", "prewritten")


def get_retrieval_backend(name: str, options: Mapping[str, Any] | None = None) -> RetrievalBackend:
    options = dict(options or {})
    if name == "demo":
        from generation.offline_retrieval import DemoCorpusRetrieval  # bm25s, numpy: only a study that uses it

        if "corpus_path" not in options:
            return DemoCorpusRetrieval()
        # As the study's check read it (generation.validation): a relative path is under CORPUS_ROOT,
        # wherever the worker runs; an absolute one stays itself.
        return DemoCorpusRetrieval(path=corpus_root() / str(options["corpus_path"]))
    if name == "corpus":
        from corpus.search import corpus_retrieval  # the corpus's index (numpy, scipy): only when used

        return corpus_retrieval()
    if name == "openalex":
        return openalex_retrieval()
    raise BackendError(
        f"Unknown retrieval backend {name!r}; choose one of {', '.join(RETRIEVAL_BACKENDS)}.", transient=False
    )


def get_generation_backend(name: str, options: Mapping[str, Any] | None = None) -> GenerationBackend:
    options = dict(options or {})
    if name == "extractive":
        return ExtractiveSummariser()
    if name == "baseline":
        from generation.baselines import BaselineSummariser  # networkx: only a study with a baseline

        return BaselineSummariser()
    if name == "openai":
        from generation.openai_chat import OpenAIChatGeneration  # the openai SDK: only for a model server

        configure_model_servers()  # once per process: the shared limit, the cache, the reply cap
        return OpenAIChatGeneration(options, model_servers_from_settings())
    if name == "prewritten":
        return PrewrittenOutputs()
    raise BackendError(
        f"Unknown generation backend {name!r}; choose one of {', '.join(GENERATION_BACKENDS)}.", transient=False
    )


def generation_models(name: str, options: Mapping[str, Any] | None = None) -> list[str] | None:
    """The model names a generation backend serves, or None when that cannot be told offline (a
    model server's catalogue is only known by asking it). Raises BackendError for an unknown backend."""
    if name == "extractive":
        return list(STRATEGIES)
    if name == "baseline":
        from generation.baselines import BASELINES  # networkx, as above

        return list(BASELINES)
    if name in ("openai", "prewritten"):  # a model server's catalogue; any name for imported outputs
        return None
    raise BackendError(
        f"Unknown generation backend {name!r}; choose one of {', '.join(GENERATION_BACKENDS)}.", transient=False
    )


def operational_setting_keys(name: str) -> frozenset[str]:
    """The backend settings of a generation backend that say how the call is made, not what the summary is
    (a model server's address, a timeout, the reply's length bound): they may change on a study whose
    summaries exist, and each candidate records the values its generation used. Every other key is the
    design. The offline backends read no settings, so for them every key is design."""
    if name == "openai":
        from generation.openai_chat import OPERATIONAL_KEYS  # the openai SDK, as above

        return OPERATIONAL_KEYS
    return frozenset()


def generation_settings_problem(name: str, options: Mapping[str, Any]) -> str | None:
    """What is wrong with the values of a generation backend's settings, or None (an unknown backend is
    someone else's error to name)."""
    if name == "openai":
        from generation.openai_chat import settings_problem  # the openai SDK, as above

        return settings_problem(options, model_servers_from_settings())
    return None
