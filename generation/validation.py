"""The checks a study's backend choices must pass before it is saved: a system's own model server, the model
it asks for, and the demo backend's corpus file. Each returns what is wrong, or None; the study service
(studies/services/study.py) raises it against the field. No Django: the configuration is passed in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from generation.config import ModelServerConfig
from generation.offline_retrieval import DEFAULT_CORPUS_PATH

MAX_REPLICAS = 32


def model_server_problem(spec: Mapping[str, Any], server: ModelServerConfig) -> str | None:
    """A system's own model server (`base_url`: one address, or a list of replicas) must be an http(s) address
    on a host the operator allowed in MODEL_SERVER_ALLOWED_HOSTS: the platform sends prompts, and an API key,
    to it. Every replica is checked."""
    options = spec.get("backend_settings")
    if not isinstance(options, Mapping) or options.get("base_url") in (None, "", []):
        return None
    given = options["base_url"]
    label = spec.get("label", "")
    urls = given if isinstance(given, list) else [given]
    if len(urls) > MAX_REPLICAS:
        return f"System {label!r}: base_url lists {len(urls)} replicas; at most {MAX_REPLICAS}."
    for url in urls:
        if problem := _url_problem(label, url, server.allowed_hosts):
            return problem
    return None


def _url_problem(label: Any, url: Any, allowed: tuple[str, ...]) -> str | None:
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        host = parts.hostname if parts else None
    except ValueError:
        parts, host = None, None
    # No user part or backslash either: clients disagree on where such an address's host begins.
    if parts is None or parts.scheme not in ("http", "https") or not host or "@" in parts.netloc or "\\" in url:
        return (
            f"System {label!r}: base_url must be a plain http:// or https:// address (no user part), or a list of "
            f"them, not {str(url)[:200]!r}."
        )
    if not host_allowed(host, allowed):
        return (
            f"System {label!r}: the model server host {host!r} is not allowed; allowed hosts are "
            f"{', '.join(allowed) or 'none'} (setting MODEL_SERVER_ALLOWED_HOSTS)."
        )
    return None


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether `host` is one of the allowed entries, read as Django reads ALLOWED_HOSTS: `*` allows any host,
    `.example.org` the domain and its subdomains, anything else that host exactly, case aside."""
    host = _bracketed(host.lower())
    for entry in (_bracketed(entry.lower()) for entry in allowed):
        if entry == "*" or entry == host:
            return True
        if entry.startswith(".") and (host == entry[1:] or host.endswith(entry)):
            return True
    return False


def _bracketed(host: str) -> str:
    """An IPv6 address in brackets, as Django writes it in ALLOWED_HOSTS (`[::1]`) and as a URL carries it:
    urlsplit's hostname drops them, and MODEL_SERVER_ALLOWED_HOSTS may hold either spelling (its default
    has `::1`)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def served_problem(spec: Mapping[str, Any], models: list[str] | None, server: ModelServerConfig) -> str | None:
    """A system's model must be one its backend serves (`models`, or None when only the server knows); a server
    that cannot be asked before the study runs must at least be configured."""
    label, model, backend = spec["label"], spec["model_name"], spec["generation_backend"]
    options = spec.get("backend_settings") or {}
    if models is not None and model not in models:
        return f"System {label!r}: the {backend} backend has no model {model!r}; it serves {', '.join(models)}."
    # A pre-written system calls no server: its outputs are imported (docs/backends.md, "Pre-written studies").
    if models is None and backend != "prewritten" and not (options.get("base_url") or server.base_urls):
        return (
            f"System {label!r}: no model server is configured for {model!r}; set base_url in its backend "
            "settings or LLM_BASE_URL."
        )
    return None


def corpus_path_problem(retrieval_settings: Any, root: Path) -> str | None:
    """A corpus file named in the retrieval settings must be an existing file under `root` (CORPUS_ROOT, resolved)
    or the bundled demo corpus: the server reads it and shows its lines to annotators."""
    if not isinstance(retrieval_settings, Mapping) or "corpus_path" not in retrieval_settings:
        return None
    given = retrieval_settings["corpus_path"]
    if not isinstance(given, str) or not given.strip() or "\x00" in given:
        return "corpus_path must be the path of a JSONL file under CORPUS_ROOT."
    path = (root / given).resolve()  # an absolute path stays itself; a relative one is under the root
    if path != DEFAULT_CORPUS_PATH.resolve() and not path.is_relative_to(root):
        return f"corpus_path {given!r} is outside the corpus folder {root} (setting CORPUS_ROOT)."
    if not path.is_file():
        return f"corpus_path {given!r}: there is no such file in {root}."
    return None
