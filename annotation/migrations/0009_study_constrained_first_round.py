from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0008_study_min_ranked_questions"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="constrained_first_round",
            field=models.BooleanField(
                default=False,
                help_text="Every first-round match pairs a persona system with a generic one (needs as many of each).",
            ),
        ),
    ]
