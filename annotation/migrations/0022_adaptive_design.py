"""The adaptive design's brackets (their design, budget and entrants) and the study's pair tallies."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0021_prewritten_outputs'),
        ('studies', '0003_study_design'),
    ]

    operations = [
        migrations.AddField(
            model_name='bracket',
            name='budget',
            field=models.PositiveSmallIntegerField(db_default=0, default=0, help_text='Adaptive design: comparisons to ask at most.'),
        ),
        migrations.AddField(
            model_name='bracket',
            name='design',
            field=models.CharField(choices=[('bracket', 'Bracket: single elimination, the winners of each round meet in the next'), ('adaptive', 'Adaptive: each next pair the one that tells most about the ranking so far')], db_default='bracket', default='bracket', max_length=8),
        ),
        migrations.AddField(
            model_name='bracket',
            name='entrants',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='PairTally',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('first_wins', models.PositiveIntegerField(default=0)),
                ('second_wins', models.PositiveIntegerField(default=0)),
                ('ties', models.PositiveIntegerField(default=0)),
                ('first', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='studies.studysystem')),
                ('second', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='studies.studysystem')),
                ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='pair_tallies', to='studies.study')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('study', 'first', 'second'), name='one_tally_per_pair'), models.CheckConstraint(condition=models.Q(('first__lt', models.F('second'))), name='tally_pair_in_order')],
            },
        ),
    ]
