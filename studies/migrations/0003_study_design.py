"""A study's design: the bracket (as before) or the adaptive design, and its comparisons per question."""

from django.db import migrations, models


class Migration(migrations.Migration):
    UPGRADE_NOTE = (
        "expand: the two columns have database defaults (bracket, NULL) and the check allows NULL, which is all the "
        "previous release writes, so it keeps working on the new schema"
    )

    dependencies = [
        ('studies', '0002_content_types_to_studies'),
    ]

    operations = [
        migrations.AddField(
            model_name='study',
            name='adaptive_matches',
            field=models.PositiveSmallIntegerField(blank=True, help_text='Adaptive design only: comparisons per question (empty: the number of systems minus one, as many as a bracket plays; at most every pair once).', null=True),
        ),
        migrations.AddField(
            model_name='study',
            name='design',
            field=models.CharField(choices=[('bracket', 'Bracket: single elimination, the winners of each round meet in the next'), ('adaptive', 'Adaptive: each next pair the one that tells most about the ranking so far')], db_default='bracket', default='bracket', help_text="How each question's pairs are chosen. Adaptive suits many systems: its analysis headline is Bradley-Terry strengths, not per-stage win rates (docs/analysis.md).", max_length=8),
        ),
        migrations.AddConstraint(
            model_name='study',
            constraint=models.CheckConstraint(condition=models.Q(('adaptive_matches__isnull', True), ('adaptive_matches__gte', 1), _connector='OR'), name='study_adaptive_matches_at_least_one'),
        ),
    ]
