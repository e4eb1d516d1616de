"""Data migration: candidates created before the snapshot existed take it from their system and study
(the best record left of what produced them)."""

from django.db import migrations


def fill_snapshot(apps, schema_editor):
    Candidate = apps.get_model("annotation", "Candidate")
    pending = Candidate.objects.filter(model_name="").select_related(
        "system", "query__participation__study__prompt_template"
    )
    batch = []
    for candidate in pending.iterator(chunk_size=2000):
        system = candidate.system
        template = candidate.query.participation.study.prompt_template
        candidate.system_label = system.label
        candidate.model_name = system.model_name
        candidate.condition = system.condition
        candidate.generation_backend = system.generation_backend
        candidate.generation_settings = system.backend_settings
        candidate.prompt_template = template
        candidate.prompt_template_version = template.version if template else None
        batch.append(candidate)
        if len(batch) >= 2000:
            _flush(Candidate, batch)
    _flush(Candidate, batch)


def _flush(Candidate, batch):
    Candidate.objects.bulk_update(
        batch,
        [
            "system_label",
            "model_name",
            "condition",
            "generation_backend",
            "generation_settings",
            "prompt_template",
            "prompt_template_version",
        ],
    )
    batch.clear()


class Migration(migrations.Migration):
    dependencies = [("annotation", "0002_candidate_snapshot")]

    operations = [migrations.RunPython(fill_snapshot, migrations.RunPython.noop)]
