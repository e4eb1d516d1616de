"""The moved models' content types follow them to the studies app, so that the permissions already granted
(`annotation.change_study`, now `studies.change_study`: the same rows) and admin log entries keep pointing at
them on a running deployment. A fresh database has no content types yet: they are made after migrating."""

from django.db import migrations

MOVED = ("study", "studysystem", "invitation", "studymembership", "prompttemplate", "studyauditlog")


def _relabel(apps, schema_editor, old: str, new: str) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model in MOVED:
        # A row already under the new label (made by a migrate that ran before this one) keeps its own.
        if not content_type.objects.using(db).filter(app_label=new, model=model).exists():
            content_type.objects.using(db).filter(app_label=old, model=model).update(app_label=new)


def forwards(apps, schema_editor):
    _relabel(apps, schema_editor, "annotation", "studies")


def backwards(apps, schema_editor):
    _relabel(apps, schema_editor, "studies", "annotation")


class Migration(migrations.Migration):
    UPGRADE_NOTE = (
        "contract: the previous release asks for annotation.* permissions, so once the content types are relabelled "
        "it refuses its staff researchers' admin pages and admin API (403) until it is stopped; annotators and "
        "superusers are not affected (docs/permissions.md)"
    )
    dependencies = [
        ("studies", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
