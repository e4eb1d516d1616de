from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0009_study_constrained_first_round"),
    ]

    operations = [
        migrations.AddField(
            model_name="query",
            name="feedback",
            field=models.TextField(
                blank=True, default="", help_text="The annotator's free-text comment (legacy imports)."
            ),
        ),
    ]
