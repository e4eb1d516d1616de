"""Research jobs of a new kind, the sample-size plan (analysis.services._run_plan)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    UPGRADE_NOTE = (
        "expand: only the field's choices change, which Django checks and the database does not store; the "
        "previous release never writes the new kind and shows a plan job it finds under its raw name"
    )

    dependencies = [
        ("analysis", "0003_researchjob_study_in_studies"),
    ]

    operations = [
        migrations.AlterField(
            model_name="researchjob",
            name="kind",
            field=models.CharField(
                choices=[
                    ("export", "Export comparison table"),
                    ("report", "Analysis report"),
                    ("stress", "Metric stress test"),
                    ("plan", "Sample-size plan"),
                ],
                max_length=8,
            ),
        ),
    ]
