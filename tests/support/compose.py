"""What `docker compose config` does to docker-compose.yml before it runs anything, without Docker: YAML anchors
and merge keys (PyYAML), variable interpolation from the project's .env, and the checks that a file valid
against the schema can still fail (an env_file or build context that is not there, a dependency or volume
that is not defined). tests/platform/test_compose.py validates the result against the Compose Specification's
JSON schema (tests/platform/compose-spec.json).

Interpolation follows the Compose Specification ("Interpolation"): $VAR and ${VAR}; ${VAR:-default} (unset or
empty) and ${VAR-default} (unset); ${VAR:?message} and ${VAR?message} (an error); ${VAR:+other} and
${VAR+other}; $$ for a literal $. Defaults may themselves hold variables. Not supported (refused, not
ignored): anything else after the name."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

NAME = r"[A-Za-z_][A-Za-z0-9_]*"
BRACED = re.compile(rf"\$\{{({NAME})(?:(:?[-?+])(.*))?\}}$", re.DOTALL)


class ComposeError(ValueError):
    """What `docker compose config` would refuse, with the place in the file."""


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a .env file; blank lines and # comments skipped, one pair of quotes removed."""
    values = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(NAME, key.strip()):
            raise ComposeError(f"{path.name}:{number}: not KEY=VALUE: {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def _closing_brace(text: str, start: int) -> int:
    """Index of the } that closes the ${ at start, counting nested ${...}."""
    depth = 0
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ComposeError(f"invalid interpolation format: unclosed ${{ in {text!r}")


def interpolate(text: str, env: dict[str, str], where: str = "") -> str:
    out = []
    i = 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
            continue
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if text.startswith("${", i):
            end = _closing_brace(text, i)
            out.append(_braced(text[i : end + 1], env, where))
            i = end + 1
            continue
        plain = re.match(NAME, text[i + 1 :])
        if plain is None:
            raise ComposeError(f"{where}: invalid interpolation format in {text!r}: a $ must start a variable or be $$")
        out.append(env.get(plain.group(0), ""))
        i += 1 + plain.end()
    return "".join(out)


def _braced(expression: str, env: dict[str, str], where: str) -> str:
    match = BRACED.match(expression)
    if match is None:
        raise ComposeError(f"{where}: invalid interpolation format {expression!r}")
    name, operator, operand = match.groups()
    value = env.get(name)
    if operator is None:
        return value or ""
    # With a colon, an empty value counts as unset.
    present = value is not None and (value != "" or not operator.startswith(":"))
    kind = operator[-1]
    if kind == "-":
        return value if present and value is not None else interpolate(operand, env, where)
    if kind == "+":
        return interpolate(operand, env, where) if present else ""
    if not present:  # "?"
        raise ComposeError(f"{where}: required variable {name} is missing a value: {operand}")
    return value or ""


def _interpolate_tree(node: Any, env: dict[str, str], where: str) -> Any:
    if isinstance(node, dict):
        return {key: _interpolate_tree(value, env, f"{where}/{key}") for key, value in node.items()}
    if isinstance(node, list):
        return [_interpolate_tree(value, env, f"{where}/{i}") for i, value in enumerate(node)]
    if isinstance(node, str):
        return interpolate(node, env, where)
    return node


def render(project: Path, file_name: str = "docker-compose.yml") -> dict[str, Any]:
    """The configuration `docker compose config` would print for project/file_name, its .env read (if there)."""
    document = yaml.safe_load((project / file_name).read_text())
    env_path = project / ".env"
    env = read_env_file(env_path) if env_path.exists() else {}
    config: dict[str, Any] = _interpolate_tree(document, env, "")
    services = config.get("services", {})
    volumes = config.get("volumes") or {}
    for name, service in services.items():
        env_files = service.get("env_file", [])
        for env_file in [env_files] if isinstance(env_files, str) else env_files:
            path = env_file if isinstance(env_file, str) else env_file["path"]
            if not (project / path).is_file():
                raise ComposeError(f"services/{name}: env file {project / path} not found")
        build = service.get("build")
        if build is not None:
            context = project / (build if isinstance(build, str) else build.get("context", "."))
            dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
            if not context.is_dir() or not (context / dockerfile).is_file():
                raise ComposeError(f"services/{name}: build context {context} or its {dockerfile} not found")
        depends_on = service.get("depends_on", [])
        for dependency in depends_on:
            if dependency not in services:
                raise ComposeError(f"services/{name}: depends on undefined service {dependency!r}")
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            named = source and not source.startswith((".", "/", "~", "$"))
            if named and ":" in str(volume) and source not in volumes:
                raise ComposeError(f"services/{name}: volume {source!r} is not defined in the top-level volumes")
    return config


def enabled(config: dict[str, Any], profiles: tuple[str, ...] = ()) -> dict[str, Any]:
    """The services `docker compose --profile P ... up` starts (the Compose Specification, "Profiles"): those with
    no `profiles`, and those with one of `profiles`. A started service's dependency must be started too."""
    services = config.get("services", {})
    started = {
        name: service
        for name, service in services.items()
        if not service.get("profiles") or set(service["profiles"]) & set(profiles)
    }
    for name, service in started.items():
        for dependency in service.get("depends_on", []):
            if dependency not in started:
                raise ComposeError(f"services/{name}: depends on {dependency!r}, which these profiles do not start")
    return started
