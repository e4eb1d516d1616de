"""The study moved to the studies app (studies/migrations/0001_initial.py): this foreign key now names it there.
State only: the constraint already references the same table (annotation_study)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("analysis", "0002_background_leases"),
        ("studies", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="researchjob",
                    name="study",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="research_jobs", to="studies.study"
                    ),
                ),
            ],
            database_operations=[],
        ),
    ]
