"""docker-compose.yml works as written: valid against the Compose specification, every image pinned, every
long-running service health-checked, one worker per queue the routes name, exactly one beat."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
# The Compose specification's JSON schema as Debian's docker-compose 1.29 ships it
# (/usr/lib/python3/dist-packages/compose/config/compose_spec.json), vendored: no network in CI.
SCHEMA = Path(__file__).with_name("compose-spec.json")
PINNED = re.compile(r"^[\w./-]+:(?!latest$)[\w.-]*\d[\w.-]*$")  # a tag with a version number in it


def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def errors(document: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_the_compose_file_follows_the_compose_specification() -> None:
    assert errors(compose()) == []


def test_the_schema_check_would_catch_a_mistake() -> None:
    broken = compose()
    broken["services"]["web"]["healthcheck"]["interval_s"] = 10  # no such key
    broken["services"]["db"]["depends_on"] = {"redis": {"condition": "when_ready"}}
    found = errors(broken)
    assert any("interval_s" in e for e in found) and any("when_ready" in e for e in found), found


def test_docker_compose_accepts_it_with_the_example_environment(tmp_path: Path) -> None:
    # .ci/run installs Debian's docker-compose; its `config` resolves anchors, env files and interpolation.
    tool = shutil.which("docker-compose")
    assert tool, "docker-compose is not installed: apt-get install -y docker-compose (as .ci/run does)"
    shutil.copy(REPO / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copy(REPO / "platform" / "env.example", tmp_path / ".env")
    result = subprocess.run([tool, "config", "-q"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_every_image_is_pinned_and_every_service_is_health_checked_or_restarted() -> None:
    services = compose()["services"]
    for name, service in services.items():
        image = service.get("image", "")
        if "build" not in service:
            assert PINNED.match(image), f"{name}: image {image!r} has no pinned version tag"
        if name != "beat":  # beat serves nothing to probe; it restarts if it dies
            assert "test" in service.get("healthcheck", {}), f"{name} has no health check"
        assert service.get("restart") == "unless-stopped", f"{name} does not come back after a crash"
        for dependency, condition in service.get("depends_on", {}).items():
            assert condition == {"condition": "service_healthy"}, f"{name} starts before {dependency} is healthy"
            assert "test" in services[dependency].get("healthcheck", {}), f"{name} waits on unchecked {dependency}"


def test_one_worker_per_queue_and_exactly_one_beat() -> None:
    services = compose()["services"]
    consumed: dict[str, list[str]] = {}
    for name, service in services.items():
        if service.get("command") == ["worker"]:
            for queue in service["environment"]["CELERY_QUEUES"].split(","):
                consumed.setdefault(queue, []).append(name)
    routed = {queue.name for queue in settings.CELERY_TASK_QUEUES}
    assert set(consumed) == routed, "every routed queue has a worker and no worker waits on an unrouted one"
    assert all(len(names) == 1 for names in consumed.values()), consumed
    assert consumed[settings.ANNOTATOR_QUEUE] != consumed[settings.RESEARCH_QUEUE]
    assert [name for name, s in services.items() if s.get("command") == ["beat"]] == ["beat"]


def test_the_image_leaves_secrets_environments_and_history_out() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for entry in (".env", ".venv", ".git", "var", "node_modules", "**/__pycache__"):
        assert entry in ignored, entry


@pytest.mark.parametrize("service", ["web", "worker-annotator", "worker-research", "beat"])
def test_app_services_use_the_repository_image(service: str) -> None:
    assert compose()["services"][service]["build"]["dockerfile"] == "platform/Dockerfile"


def test_the_dockerfile_names_every_role_the_image_is_run_as() -> None:
    # Its comment said "two roles (web, worker)" after beat, manage and the per-queue workers were added.
    dockerfile = (REPO / "platform" / "Dockerfile").read_text()
    header = " ".join(line.lstrip("# ") for line in dockerfile.split("FROM ", 1)[0].splitlines())
    roles = set(re.findall(r"^  (\w+)\)", (REPO / "platform" / "entrypoint.sh").read_text(), re.MULTILINE))
    assert roles >= {"web", "worker", "beat", "manage"}, roles
    services = {n: s for n, s in compose()["services"].items() if s.get("image") == "satisfy:local"}
    assert {s["command"][0] for s in services.values()} <= roles
    named = [*roles, *(n for n, s in services.items() if s["command"][0] == "worker")]
    assert [n for n in named if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", header)] == []


def test_every_volume_of_the_app_image_is_a_folder_the_image_gives_its_user() -> None:
    # A new named volume takes the owner of the image's folder it is mounted on; where the image has none it is
    # root's, and the app user (uid 1000) cannot write to it: every research output on the media volume failed
    # with PermissionError. No Docker here: the Dockerfile must create each mount point and chown it to app.
    dockerfile = (REPO / "platform" / "Dockerfile").read_text()
    created = {Path(p) for p in re.findall(r"mkdir -p ((?:/app/\S+ ?)+)", dockerfile)[0].split()}
    owned = [Path(p) for p in re.findall(r"chown -R app ((?:/app/\S+ ?)+)", dockerfile)[0].split()]
    services = compose()["services"]
    for name, service in services.items():
        if service.get("image") != "satisfy:local":
            continue
        for volume in service.get("volumes", []):
            target = Path(volume.split(":")[1])
            assert any(target == c or target in c.parents for c in created), f"{name}: {target} is not in the image"
            assert any(target == o or o in target.parents for o in owned), f"{name}: {target} is root's"


def test_the_bm25_index_is_on_a_volume_the_web_server_the_workers_and_manage_share() -> None:
    # import_corpus (`docker compose run --rm web manage import_corpus`) writes the index into CORPUS_INDEX_DIR;
    # in a container's own folder it went with the container, and no worker ever searched it.
    # The image's checkout is /app, so config/settings/base.py's default, VAR_DIR / "corpus-index", is this
    # (platform/env.example leaves CORPUS_INDEX_DIR unset).
    index_dir = "/app/var/corpus-index"
    assert "CORPUS_INDEX_DIR=" not in (REPO / "platform" / "env.example").read_text().replace("# CORPUS_INDEX_DIR", "")
    services = compose()["services"]
    mounted = {
        name: {volume.split(":")[0] for volume in service.get("volumes", []) if volume.split(":")[1] == index_dir}
        for name, service in services.items()
        if name in ("web", "worker-annotator", "worker-research")
    }
    assert all(len(sources) == 1 for sources in mounted.values()), mounted
    assert len(set.union(*mounted.values())) == 1, mounted  # one named volume, the same for all three
    assert next(iter(set.union(*mounted.values()))) in compose()["volumes"]
