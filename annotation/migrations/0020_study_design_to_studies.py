"""Study design leaves annotation for studies (studies/migrations/0001_initial.py): annotation's state forgets the
six models and its foreign keys point at studies' models. State only: the tables and their constraints stay as
they are (the foreign keys already reference the same tables)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0019_audit_log"),
        ("studies", "0001_initial"),
        # Their foreign keys to the study move first, so that nothing points at annotation's Study when it goes.
        ("analysis", "0003_researchjob_study_in_studies"),
        ("scoring", "0004_scoringrun_study_in_studies"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="participation",
                    name="study",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="participations", to="studies.study"
                    ),
                ),
                migrations.AlterField(
                    model_name="participation",
                    name="invitation",
                    field=models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to="studies.invitation"
                    ),
                ),
                migrations.AlterField(
                    model_name="candidate",
                    name="system",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="candidates", to="studies.studysystem"
                    ),
                ),
                migrations.AlterField(
                    model_name="candidate",
                    name="prompt_template",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="studies.prompttemplate",
                    ),
                ),
                migrations.DeleteModel(name="StudyAuditLog"),
                migrations.DeleteModel(name="StudyMembership"),
                migrations.DeleteModel(name="StudySystem"),
                migrations.DeleteModel(name="Invitation"),
                migrations.DeleteModel(name="Study"),
                migrations.DeleteModel(name="PromptTemplate"),
            ],
            database_operations=[],
        ),
    ]
