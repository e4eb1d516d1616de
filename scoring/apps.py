from django.apps import AppConfig
from django.conf import settings

from scoring.core import hf_models
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
        # The factuality metrics' weights folder, device and batch size (scoring.core.hf_models).
        hf_models.configure(
            weights_dir=settings.METRICS_WEIGHTS_DIR or None,
            device=settings.METRICS_DEVICE,
            batch_size=settings.METRICS_BATCH_SIZE,
        )
