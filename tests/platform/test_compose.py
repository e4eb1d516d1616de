"""docker-compose.yml works as written: valid against the Compose specification, every image pinned, every
long-running service health-checked, one worker per queue the routes name, exactly one beat."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from django.conf import settings

from tests.support.compose import ComposeError, enabled, interpolate, render

REPO = Path(__file__).resolve().parents[2]
# The Compose Specification's JSON schema (draft-07), vendored: no network in CI. Source: the compose-spec
# repository's schema/compose-spec.json (Apache-2.0) at commit a08f8d51631b7127ddac3d2c65537db429d0f1d0
# (2025-10-28), the schema `docker compose` v2 validates with. To update: replace the file with a newer commit's,
# note it here, and run this module.
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


def test_the_rendered_configuration_with_the_example_environment_follows_the_specification(tmp_path: Path) -> None:
    # What `docker compose config` checks (tests/support/compose.py): the .env it names is there, anchors and
    # interpolation resolve, build contexts, dependencies and volumes exist; then the schema on the result.
    shutil.copy(REPO / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copytree(REPO / "platform", tmp_path / "platform")
    with pytest.raises(ComposeError, match=r"env file .*\.env not found"):
        render(tmp_path)  # README: cp platform/env.example .env first
    shutil.copy(REPO / "platform" / "env.example", tmp_path / ".env")
    config = render(tmp_path)
    assert errors(config) == []
    # The merge key gave every app service the shared settings, and $$ reached the container as one $.
    assert config["services"]["worker-research"]["environment"]["DATABASE_URL"].endswith("@db:5432/satisfy")
    assert "celery@$HOSTNAME " in config["services"]["worker-annotator"]["healthcheck"]["test"][1]


APP_SERVICES = ("web", "worker-annotator", "worker-retrieval", "worker-research", "beat")


def test_env_passes_a_managed_database_and_broker_through_to_every_app_service(tmp_path: Path) -> None:
    """Issue 31: the compose file's `environment:` block overrode .env, so a managed PostgreSQL and RabbitMQ in
    .env were rendered as db:5432 and redis://redis:6379/0."""
    shutil.copy(REPO / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copytree(REPO / "platform", tmp_path / "platform")
    managed = "postgres://app:s3cret@pg.example.org:5432/satisfy"
    broker = "amqp://app:s3cret@mq.example.org:5672/satisfy"
    (tmp_path / ".env").write_text(f"DATABASE_URL={managed}\nCELERY_BROKER_URL={broker}\n")
    services = render(tmp_path)["services"]
    for name in APP_SERVICES:
        assert services[name]["environment"]["DATABASE_URL"] == managed, name
        assert services[name]["environment"]["CELERY_BROKER_URL"] == broker, name
    # Without them, the bundled services, on the password .env gives the database.
    (tmp_path / ".env").write_text("POSTGRES_PASSWORD=long-and-random\n")
    services = render(tmp_path)["services"]
    assert services["db"]["environment"]["POSTGRES_PASSWORD"] == "long-and-random"
    for name in APP_SERVICES:
        assert services[name]["environment"]["DATABASE_URL"] == "postgres://satisfy:long-and-random@db:5432/satisfy"
        assert services[name]["environment"]["CELERY_BROKER_URL"] == "redis://redis:6379/0"


def test_interpolation_as_docker_compose_does_it() -> None:
    env = {"TAG": "16.4", "EMPTY": ""}
    assert interpolate("postgres:${TAG:-15}-bookworm", env) == "postgres:16.4-bookworm"
    assert interpolate("${MISSING:-15}|${EMPTY:-15}|${EMPTY-15}|$TAG|$$TAG", env) == "15|15||16.4|$TAG"
    assert interpolate("${MISSING:-${TAG}}|${TAG:+set}|${EMPTY:+set}|${EMPTY+set}", env) == "16.4|set||set"
    with pytest.raises(ComposeError, match="required variable SECRET_KEY is missing a value: set it in .env"):
        interpolate("${SECRET_KEY:?set it in .env}", env, "services/web/environment")
    for broken in ("${TAG", "${TAG:x}", "cost: $5"):
        with pytest.raises(ComposeError, match="interpolation"):
            interpolate(broken, env)


def test_a_name_the_file_does_not_define_is_refused(tmp_path: Path) -> None:
    (tmp_path / "docker-compose.yml").write_text(
        "services:\n  web:\n    image: nginx:1.27.2\n    volumes: ['media:/data']\n    depends_on: [db]\n"
    )
    with pytest.raises(ComposeError, match="undefined service 'db'"):
        render(tmp_path)
    (tmp_path / "docker-compose.yml").write_text(
        "services:\n  web:\n    image: nginx:1.27.2\n    volumes: ['media:/data', './here:/there']\n"
    )
    with pytest.raises(ComposeError, match="volume 'media' is not defined"):
        render(tmp_path)


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
    # Issue 30: retrievals waited behind generations held by a hanging model server. A question's retrieval has a
    # queue and a worker of its own, prefork (its soft time limit enforced, its CPU-bound search on every core).
    assert settings.CELERY_TASK_ROUTES["annotation.tasks.retrieve_query"] == {"queue": settings.RETRIEVAL_QUEUE}
    assert settings.CELERY_TASK_ROUTES["annotation.tasks.generate_candidate"] == {"queue": settings.ANNOTATOR_QUEUE}
    (retrieval,) = consumed[settings.RETRIEVAL_QUEUE]
    assert retrieval not in consumed[settings.ANNOTATOR_QUEUE] + consumed[settings.RESEARCH_QUEUE]
    assert services[retrieval]["environment"].get("CELERY_POOL", "prefork") == "prefork"
    assert [name for name, s in services.items() if s.get("command") == ["beat"]] == ["beat"]


def test_the_image_leaves_secrets_environments_and_history_out() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    for entry in (".env", ".venv", ".git", "var", "node_modules", "**/__pycache__"):
        assert entry in ignored, entry


@pytest.mark.parametrize("service", APP_SERVICES)
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
        if name in ("web", "worker-annotator", "worker-retrieval", "worker-research")
    }
    assert all(len(sources) == 1 for sources in mounted.values()), mounted
    assert len(set.union(*mounted.values())) == 1, mounted  # one named volume, the same for all three
    assert next(iter(set.union(*mounted.values()))) in compose()["volumes"]


def test_prometheus_scrapes_services_that_exist_with_the_token() -> None:
    """platform/monitoring/prometheus.yml names compose services (on the ports they serve metrics on), and
    the monitoring profile starts Prometheus with that configuration."""
    services = compose()["services"]
    scrape = yaml.safe_load((REPO / "platform/monitoring/prometheus.yml").read_text())
    targets = [t for job in scrape["scrape_configs"] for c in job["static_configs"] for t in c["targets"]]
    assert targets
    for target in targets:
        host, port = target.split(":")
        assert host in services, f"Prometheus scrapes {host}, which docker-compose.yml does not define"
        env = services[host].get("environment", {})
        assert port == "8000" if host == "web" else env.get("METRICS_PORT") == port, target
    for job in scrape["scrape_configs"]:
        assert job["authorization"]["credentials_file"] == "/etc/prometheus/metrics-token", job["job_name"]
    assert {"prometheus", "grafana"} <= {n for n, s in services.items() if "monitoring" in s.get("profiles", [])}
    dashboard = json.loads((REPO / "platform/monitoring/grafana/dashboards/satisfy.json").read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for series in ("satisfy_question_first_comparison_seconds", "satisfy_queue_depth", "satisfy_model_server_call"):
        assert series in exprs


GPU_SERVICES = {"vllm", "vllm-judge"}


def render_with(tmp_path: Path, extra: str) -> dict[str, Any]:
    """The configuration with platform/env.example as .env, plus `extra` lines."""
    shutil.copy(REPO / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copytree(REPO / "platform", tmp_path / "platform", dirs_exist_ok=True)
    (tmp_path / ".env").write_text((REPO / "platform" / "env.example").read_text() + extra)
    return render(tmp_path)


def option(service: dict[str, Any], name: str) -> str:
    """The value of `--name=value` in a vLLM service's command."""
    values = [a.split("=", 1)[1] for a in service["command"] if a.startswith(f"--{name}=")]
    assert len(values) == 1, (name, service["command"])
    return str(values[0])


def test_the_gpu_profile_adds_a_generation_and_a_judge_server_and_nothing_else(tmp_path: Path) -> None:
    config = render_with(tmp_path, "VLLM_MODEL=Qwen/Qwen2.5-7B-Instruct\nVLLM_JUDGE_MODEL=Qwen/Qwen2.5-14B-Instruct\n")
    assert errors(config) == []
    default, gpu = enabled(config), enabled(config, ("gpu",))
    assert set(gpu) - set(default) == GPU_SERVICES  # only under the profile
    assert not GPU_SERVICES & set(enabled(config, ("s3", "monitoring")))
    for name in GPU_SERVICES:
        service = gpu[name]
        assert PINNED.match(service["image"]) and service["image"].startswith("vllm/vllm-openai:"), service["image"]
        assert "/health" in " ".join(service["healthcheck"]["test"]), name
        assert option(service, "port") == "8000"
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"], device
    # Each server on a GPU of its own: a scoring run's judges never take generation's memory or slots.
    devices = [set(gpu[n]["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]) for n in GPU_SERVICES]
    assert devices[0] and devices[1] and not devices[0] & devices[1], devices


def test_the_gpu_profile_is_wired_as_the_generation_server_and_the_judge(tmp_path: Path) -> None:
    config = render_with(tmp_path, "VLLM_MODEL=Qwen/Qwen2.5-7B-Instruct\nVLLM_JUDGE_MODEL=Qwen/Qwen2.5-14B-Instruct\n")
    services = config["services"]
    env_file = (tmp_path / ".env").read_text()
    found = re.search(r"^LLM_CONCURRENCY=(\d+)$", env_file, re.MULTILINE)
    assert found, "platform/env.example sets LLM_CONCURRENCY"
    concurrency = int(found.group(1))
    for name in APP_SERVICES:
        env = services[name]["environment"]
        generation, judge = (
            re.fullmatch(r"http://([\w-]+):(\d+)/v1", env[k]) for k in ("LLM_BASE_URL", "JUDGE_BASE_URL")
        )
        assert generation and judge, (name, env)
        assert generation.group(1) == "vllm" and judge.group(1) == "vllm-judge", name  # the judge on its own server
        assert generation.group(2) == option(services["vllm"], "port") and judge.group(2) == option(
            services["vllm-judge"], "port"
        )
        # The app asks each server for the model it serves: a study system's model name is VLLM_MODEL.
        assert option(services["vllm"], "served-model-name") == "Qwen/Qwen2.5-7B-Instruct"
        assert env["JUDGE_MODEL"] == option(services["vllm-judge"], "served-model-name") == "Qwen/Qwen2.5-14B-Instruct"
    # The sizing rule (docs/deploy.md, "GPUs"): the deployment never has more calls in flight than a server batches.
    for server in GPU_SERVICES:
        assert concurrency <= int(option(services[server], "max-num-seqs")), server


def test_without_the_gpu_models_nothing_points_at_a_server_that_is_not_started_and_env_passes_through(
    tmp_path: Path,
) -> None:
    services = render_with(tmp_path, "")["services"]
    for name in APP_SERVICES:
        env = services[name]["environment"]
        assert (env["LLM_BASE_URL"], env["JUDGE_BASE_URL"], env["JUDGE_MODEL"]) == ("", "", ""), name
    hosted = "LLM_BASE_URL=https://models.example.org/v1\nJUDGE_BASE_URL=https://judges.example.org/v1\n"
    services = render_with(tmp_path, hosted + "VLLM_MODEL=m\nVLLM_JUDGE_MODEL=j\nJUDGE_MODEL=judge-7b\n")["services"]
    for name in APP_SERVICES:
        env = services[name]["environment"]
        assert env["LLM_BASE_URL"] == "https://models.example.org/v1" and env["JUDGE_MODEL"] == "judge-7b", name
        assert env["JUDGE_BASE_URL"] == "https://judges.example.org/v1", name


def test_a_service_started_without_its_dependencys_profile_is_refused() -> None:
    config = {"services": {"worker": {"depends_on": ["vllm"]}, "vllm": {"profiles": ["gpu"]}}}
    with pytest.raises(ComposeError, match="depends on 'vllm', which these profiles do not start"):
        enabled(config)
    assert set(enabled(config, ("gpu",))) == {"worker", "vllm"}
