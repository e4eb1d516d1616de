from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from kernel.checks import broker_persistence, embedded_defaults, research_storage


class AnnotationConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "annotation"
    verbose_name = "Annotation studies"

    def ready(self) -> None:
        checks.register(embedded_defaults, checks.Tags.database, deploy=True)
        checks.register(research_storage, checks.Tags.files, deploy=True)
        checks.register(broker_persistence, checks.Tags.database, deploy=True)
        # Checked once the settings are final (a deployment's own settings module may add caches), so that a
        # wrong name stops every process at start-up instead of failing each generation or retrieval.
        named = [("OPENALEX_CACHE_ALIAS", settings.OPENALEX_CACHE_ALIAS)]
        if settings.LLM_CACHE == "cache":
            named.append(("LLM_CACHE_ALIAS", settings.LLM_CACHE_ALIAS))
        for setting, alias in named:
            if alias not in settings.CACHES:
                raise ImproperlyConfigured(
                    f"{setting} names the cache {alias!r}, which CACHES does not define (it has: "
                    f"{', '.join(sorted(settings.CACHES))})."
                )
