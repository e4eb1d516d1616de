"""The embedded default (`bin/demo`: SQLite, the offline corpus and summariser) plays a whole tournament: an
annotator joins the demo study, asks a question, answers every match on the comparison page and through the
API, and finishes. The rest of the suite runs on PostgreSQL, where a statement SQLite cannot run (a row lock
written into plain SQL) once made every answer on the demo a 500."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.newcomer.test_fresh_clone import REPO_ROOT, UNSET, _manage, _ok

JOURNEY = r"""
import json, re, sys, time
import django
django.setup()
from django.test import Client
from annotation.models import Judgment, Query
from studies.models import Invitation

token = Invitation.objects.get(study__slug="demo", note="demo").token
out = {}
browser = Client(HTTP_HOST="127.0.0.1")
out["join"] = browser.post(f"/join/{token}/", {"consent": "on"}).status_code
accepted = browser.post(f"/api/v1/invitations/{token}/accept/", {"consent": True}, content_type="application/json")
out["accept"] = accepted.status_code
me = accepted.json()
api = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Token {me['token']}")
persona = {"role": "PhD student", "domain": "Nursing", "expertise": "intermediate",
           "research_area": "occupational health", "use_case": "literature review"}
out["persona"] = api.put(f"/api/v1/participations/{me['id']}/persona/", persona, content_type="application/json").status_code
asked = api.post(f"/api/v1/participations/{me['id']}/queries/",
                 {"text": "How does night shift work affect sleep in nurses?"}, content_type="application/json")
out["ask"] = asked.status_code
query = asked.json()
for _ in range(120):
    if api.get(f"/api/v1/queries/{query['id']}/").json()["status"] == "ready":
        break
    time.sleep(0.5)
answers = []
page = True
while True:
    current = api.get(f"/api/v1/queries/{query['id']}/current-match/")
    if current.status_code == 204:
        break
    match = current.json()
    if page:  # the first match on the comparison page, as a browser answers it
        shown = browser.get(f"/study/demo/q/{query['index']}/compare/")
        posted = browser.post(f"/study/demo/q/{query['index']}/compare/",
                              {"match_id": match["id"], "choice": "left", **dict(re.findall(r'name="(shown)" value="([^"]+)"', shown.content.decode()))})
        answers.append(["page", shown.status_code, posted.status_code])
        page = False
    else:
        answered = api.post(f"/api/v1/matches/{match['id']}/choice/", {"choice": "right"}, content_type="application/json")
        again = api.post(f"/api/v1/matches/{match['id']}/choice/", {"choice": "right"}, content_type="application/json")
        answers.append(["api", answered.status_code, again.status_code])
    if len(answers) > 5:
        break
out["answers"] = answers
out["finish"] = api.post(f"/api/v1/participations/{me['id']}/finish/").status_code
out["judgments"] = Judgment.objects.filter(match__bracket__query_id=query["id"]).count()
out["status"] = Query.objects.get(pk=query["id"]).status
print(json.dumps(out))
"""


def test_the_demo_on_sqlite_plays_a_whole_tournament(tmp_path: Path) -> None:
    _ok(_manage(tmp_path, "migrate", "--noinput"))
    _ok(_manage(tmp_path, "seed_demo", "--admin-password", "s3cret-Pass"))
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.local",  # manage.py's default, what bin/demo runs
        ENV_FILE=str(tmp_path / "no.env"),
        BROKER_DIR=str(tmp_path / "broker"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        MEDIA_ROOT=str(tmp_path / "media"),
        CORPUS_ROOT=str(tmp_path / "corpora"),
        PYTHONPATH=str(REPO_ROOT),
        CELERY_TASK_ALWAYS_EAGER="true",  # the demo's worker, run inside the request that queues the work
    )
    done = subprocess.run(
        [sys.executable, "-c", JOURNEY], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out["join"], out["accept"], out["persona"], out["ask"]) == (302, 200, 200, 201), out
    # Round one on the page (shown, then redirected after the answer), the rest through the API (the same
    # answer sent twice is taken once); a bracket of four has three matches, or two when the final is skipped.
    assert out["answers"][0] == ["page", 200, 302], out
    assert all(a == ["api", 200, 200] for a in out["answers"][1:]) and 2 <= len(out["answers"]) <= 3, out
    assert out["judgments"] == len(out["answers"]) and out["status"] == "ranked", out
    assert out["finish"] == 200, out
