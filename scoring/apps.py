from django.apps import AppConfig
from django.conf import settings

from scoring.core.embeddings import configure


class ScoringConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "scoring"
    verbose_name = "Automatic metrics"

    def ready(self) -> None:
        # Every path that runs the embedding metrics or BERTScore in this process (a scoring chunk, a
        # stress-test job, `manage.py score_texts` and `stress_test`) takes METRICS_DEVICE and
        # METRICS_BATCH_SIZE from here; the module imports no torch until a model is loaded.
        configure(device=settings.METRICS_DEVICE, batch_size=settings.METRICS_BATCH_SIZE)
