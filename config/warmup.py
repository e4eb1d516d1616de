"""What a web worker would load on its first requests, loaded once in gunicorn's master before it forks
(platform/gunicorn.conf.py, when_ready): the URLconf with every view module, each language's translations, the
compiled templates and the broker's transport. A worker recycled after max_requests inherits them and serves its
first request as fast as its thousandth: before, that request took seconds on a busy host (the URLconf's
imports alone). Nothing here opens a database or broker connection, which every forked worker would share."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.template import TemplateDoesNotExist, TemplateSyntaxError, engines
from django.urls import get_resolver
from django.utils import translation

from config.celery import app


def preload() -> None:
    resolver = get_resolver()
    resolver.url_patterns  # noqa: B018 - imports the URLconf and every view module it names
    resolver.reverse_dict  # noqa: B018 - builds the reverse lookup that redirects and templates use
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            translation.gettext("Summary study")  # loads the language's catalogs (Django's and every app's)
    for engine in engines.all():
        for folder in getattr(engine, "template_dirs", ()):
            for path in Path(folder).rglob("*.html"):
                try:
                    engine.get_template(str(path.relative_to(folder)))  # compiled into the cached loader
                except (TemplateDoesNotExist, TemplateSyntaxError):
                    continue
    app.autodiscover_tasks(force=True)  # every app's tasks module, which the first send imports (kernel/tasks.py)
    app.finalize(auto=True)  # binds the tasks (at the first send otherwise)
    app.backend  # noqa: B018 - resolving it scans the installed packages' entry points
    app.connection_for_write().transport  # noqa: B018 - imports the transport (the redis package), unconnected
