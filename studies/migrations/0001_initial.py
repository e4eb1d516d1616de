"""Study design leaves annotation for studies: the same tables, now in the studies app's state."""

import django.db.models.deletion
import studies.models
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        # The tables exist already, made by annotation's migrations up to this one.
        ("annotation", "0019_audit_log"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    # State only: the models left annotation with their tables (db_table keeps the names); nothing is created.
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='PromptTemplate',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.SlugField(max_length=80)),
                        ('version', models.PositiveIntegerField(default=1)),
                        ('body', models.TextField()),
                        ('persona_block', models.TextField(help_text='Inserted as {persona_block} in the personalised condition only. Placeholders: {role}, {domain}, {expertise}, {research_area}, {use_case}.')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'annotation_prompttemplate',
                        'ordering': ['name', '-version'],
                        'constraints': [models.UniqueConstraint(fields=('name', 'version'), name='unique_prompt_version')],
                    },
                ),
                migrations.CreateModel(
                    name='Study',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.SlugField(max_length=80, unique=True)),
                        ('title', models.CharField(max_length=200)),
                        ('instructions', models.TextField(blank=True)),
                        ('consent_text', models.TextField(blank=True)),
                        ('status', models.CharField(choices=[('draft', 'Draft'), ('open', 'Open'), ('paused', 'Paused'), ('closed', 'Closed')], default='draft', max_length=10)),
                        ('queries_per_annotator', models.PositiveSmallIntegerField(default=8)),
                        ('min_ranked_questions', models.PositiveSmallIntegerField(default=1, help_text='Questions an annotator must rank to earn the completion code (1 to the questions per annotator).')),
                        ('max_query_chars', models.PositiveIntegerField(default=1000)),
                        ('retrieval_backend', models.CharField(default='demo', max_length=40)),
                        ('retrieval_k', models.PositiveSmallIntegerField(default=10)),
                        ('retrieval_settings', models.JSONField(blank=True, default=dict)),
                        ('constrained_first_round', models.BooleanField(default=False, help_text='Every first-round match pairs a persona system with a generic one (needs as many of each).')),
                        ('open_link_enabled', models.BooleanField(default=False, help_text="Anyone with the study's open link may join (besides single-use invitations).")),
                        ('open_link_token', models.CharField(blank=True, default='', editable=False, help_text="The open link's secret; set when enabled.", max_length=64)),
                        ('participant_cap', models.PositiveIntegerField(blank=True, help_text='New participations are refused once this many have joined (empty: no cap).', null=True)),
                        ('place_timeout_minutes', models.PositiveIntegerField(blank=True, help_text="Minutes after joining after which a participant who has not finished no longer holds one of the cap's places (the recruiting platform's maximum time allowed; empty: a place is held until the end).", null=True)),
                        ('open_link_expires_at', models.DateTimeField(blank=True, help_text='The open link refuses new participations after this time (empty: never).', null=True)),
                        ('external_id_param', models.CharField(blank=True, default='', help_text="The URL parameter carrying the recruiting platform's participant id besides PROLIFIC_PID and external_id (e.g. workerId for MTurk).", max_length=40)),
                        ('trust_platform_id', models.BooleanField(default=False, help_text="Weaker: the recruiting platform's participant id alone takes any browser back to that participant's unfinished participation (anyone with the open link and the id is that participant). Off: coming back from another browser needs the participant's resume link (docs/crowd.md).")),
                        ('completion_url', models.URLField(blank=True, default='', help_text="Where a finished annotator is sent (Prolific's URL).", max_length=500)),
                        ('crowd_completion_code', models.CharField(blank=True, default='', help_text="The study-level completion code shown to every finished annotator (Prolific's); empty: each participant gets their own code.", max_length=40)),
                        ('screen_out_url', models.URLField(blank=True, default='', help_text="Where a screened-out annotator is sent (declined consent, failed the screening question, or stopped by the check policy): the recruiting platform's return or screen-out link.", max_length=500)),
                        ('screening_question', models.TextField(blank=True, default='', help_text='Optional question asked after consent, before the persona form.')),
                        ('screening_choices', models.JSONField(blank=True, default=list, help_text='The answers offered (a JSON list).')),
                        ('screening_accepted', models.JSONField(blank=True, default=list, help_text='The answers that let the annotator continue (a JSON list).')),
                        ('check_share', models.FloatField(default=0.0, help_text="Share of questions (0 to 1) whose comparisons include one attention check: this question's summary against one written for another question. 0: no checks.")),
                        ('check_policy', models.CharField(choices=[('warn', 'Warn: show a gentle notice after a failed check'), ('stop', 'Stop: end the participation after the set number of failed checks')], default='warn', max_length=4)),
                        ('check_max_failures', models.PositiveSmallIntegerField(default=1, help_text="Failed checks that end the participation (stop policy) and exclude it from the analysis (the 'checks' exclusion rule).")),
                        ('speed_threshold_seconds', models.FloatField(blank=True, help_text='Flag a participation whose median time per comparison is under this many seconds. Empty: no flag.', null=True)),
                        ('language', models.CharField(choices=studies.models.study_languages, default='en', help_text="The language of the annotator pages. The study's title, instructions and consent text are shown as written, so write them in this language.", max_length=16)),
                        ('allow_ties', models.BooleanField(default=False, help_text='Offer "both equally good" besides "neither meets my need"; a tie advances one side by the bracket\'s seeded coin (a tie in the final ends the bracket with no single winner).')),
                        ('comments', models.CharField(choices=[('off', 'No comment box'), ('match', 'An optional comment on every comparison'), ('question', 'An optional comment on each question')], default='off', max_length=8)),
                        ('identical_policy', models.CharField(choices=[('notice', 'Show the pair with a notice that the summaries are (nearly) the same'), ('tie', 'Record the pair as a tie without asking'), ('regenerate', 'Generate one of the two again (at most twice), then show with a notice')], default='notice', help_text='What to do with two identical or near-identical summaries; exports flag them in every case.', max_length=10)),
                        ('practice_round', models.BooleanField(default=False, help_text='A fixed practice comparison with feedback before the first question (never stored as data).')),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('prompt_template', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='studies.prompttemplate')),
                    ],
                    options={
                        'verbose_name_plural': 'studies',
                        'db_table': 'annotation_study',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='Invitation',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('token', models.CharField(max_length=64, unique=True)),
                        ('max_uses', models.PositiveIntegerField(default=1)),
                        ('uses', models.PositiveIntegerField(default=0)),
                        ('expires_at', models.DateTimeField(blank=True, null=True)),
                        ('note', models.CharField(blank=True, max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='invitations', to='studies.study')),
                    ],
                    options={
                        'db_table': 'annotation_invitation',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='StudyAuditLog',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('study_slug', models.CharField(max_length=80)),
                        ('actor_name', models.CharField(blank=True, help_text='Empty for a command or the system.', max_length=150)),
                        ('origin', models.CharField(help_text='The page, API or command it came from ("admin", "manage.py study_member").', max_length=100)),
                        ('event_type', models.CharField(choices=[('study_created', 'Study created'), ('study_settings_changed', 'Study settings changed'), ('study_status_changed', 'Study status changed'), ('study_open_link_changed', 'Open link changed'), ('study_systems_changed', 'Systems changed'), ('study_deleted', 'Study deleted'), ('row_deleted', 'Invitation or participation deleted'), ('member_added', 'Member added'), ('member_role_changed', "Member's role changed"), ('member_removed', 'Member removed'), ('invitations_created', 'Invitations created'), ('invitation_changed', 'Invitation changed'), ('participation_excluded', 'Participation excluded'), ('participation_included', "Participation's exclusion undone"), ('generation_retried', 'Failed generation retried'), ('retrieval_retried', 'Failed retrieval retried'), ('research_job_started', 'Research job started'), ('research_job_cancelled', 'Research job cancelled'), ('job_file_downloaded', 'Job file downloaded'), ('scoring_run_started', 'Scoring run started'), ('preview_started', 'Preview as annotator started')], max_length=40)),
                        ('event_time', models.DateTimeField(db_index=True)),
                        ('object_type', models.CharField(help_text='What was changed: study, membership, invitation, ...', max_length=40)),
                        ('object_id', models.CharField(blank=True, max_length=40)),
                        ('object_repr', models.CharField(blank=True, max_length=200)),
                        ('before', models.JSONField(blank=True, null=True)),
                        ('after', models.JSONField(blank=True, null=True)),
                        ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audit_log', to=settings.AUTH_USER_MODEL)),
                        ('study', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='audit_log', to='studies.study')),
                    ],
                    options={
                        'verbose_name': 'audit log entry',
                        'verbose_name_plural': 'audit log',
                        'db_table': 'annotation_studyauditlog',
                        'ordering': ['-event_time', '-pk'],
                    },
                ),
                migrations.CreateModel(
                    name='StudyMembership',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('role', models.CharField(choices=[('owner', 'Owner: edits the study, its systems, status, invitations and members'), ('researcher', 'Researcher: runs scoring, exports, reports and stress tests; downloads outputs'), ('viewer', 'Viewer: sees results and progress only')], max_length=10)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='studies.study')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='study_memberships', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'annotation_studymembership',
                        'ordering': ['study', 'user'],
                    },
                ),
                migrations.CreateModel(
                    name='StudySystem',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('label', models.SlugField(help_text='Internal name, never shown to annotators.', max_length=80)),
                        ('model_name', models.CharField(max_length=200)),
                        ('generation_backend', models.CharField(default='extractive', max_length=40)),
                        ('backend_settings', models.JSONField(blank=True, default=dict)),
                        ('condition', models.CharField(choices=[('persona', 'With persona profile'), ('generic', 'Generic (no persona)')], max_length=10)),
                        ('order', models.PositiveSmallIntegerField(default=0)),
                        ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='systems', to='studies.study')),
                    ],
                    options={
                        'db_table': 'annotation_studysystem',
                        'ordering': ['study', 'order', 'id'],
                    },
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.CheckConstraint(condition=models.Q(('queries_per_annotator__gte', 1)), name='study_queries_at_least_one'),
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.CheckConstraint(condition=models.Q(('retrieval_k__gte', 1)), name='study_k_at_least_one'),
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.CheckConstraint(condition=models.Q(('min_ranked_questions__gte', 1), ('min_ranked_questions__lte', models.F('queries_per_annotator'))), name='study_min_ranked_within_queries'),
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.CheckConstraint(condition=models.Q(('check_share__gte', 0), ('check_share__lte', 1)), name='study_check_share_0_1'),
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.CheckConstraint(condition=models.Q(('check_max_failures__gte', 1)), name='study_check_failures_at_least_one'),
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.CheckConstraint(condition=models.Q(('participant_cap__isnull', True), ('participant_cap__gte', 1), _connector='OR'), name='study_cap_at_least_one'),
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.CheckConstraint(condition=models.Q(('place_timeout_minutes__isnull', True), ('place_timeout_minutes__gte', 1), _connector='OR'), name='study_place_timeout_at_least_one'),
                ),
                migrations.AddConstraint(
                    model_name='study',
                    constraint=models.UniqueConstraint(condition=models.Q(('open_link_token', ''), _negated=True), fields=('open_link_token',), name='unique_open_link_token'),
                ),
                migrations.AddConstraint(
                    model_name='invitation',
                    constraint=models.CheckConstraint(condition=models.Q(('uses__lte', models.F('max_uses'))), name='invitation_uses_le_max'),
                ),
                migrations.AddIndex(
                    model_name='studyauditlog',
                    index=models.Index(fields=['study', '-event_time'], name='audit_study_time'),
                ),
                migrations.AddConstraint(
                    model_name='studyauditlog',
                    constraint=models.CheckConstraint(condition=models.Q(('event_type__in', ['study_created', 'study_settings_changed', 'study_status_changed', 'study_open_link_changed', 'study_systems_changed', 'study_deleted', 'row_deleted', 'member_added', 'member_role_changed', 'member_removed', 'invitations_created', 'invitation_changed', 'participation_excluded', 'participation_included', 'generation_retried', 'retrieval_retried', 'research_job_started', 'research_job_cancelled', 'job_file_downloaded', 'scoring_run_started', 'preview_started'])), name='audit_event_type_known'),
                ),
                migrations.AddConstraint(
                    model_name='studyauditlog',
                    constraint=models.CheckConstraint(condition=models.Q(('origin__in', ['admin', 'admin API', 'research page', 'research API', 'annotator page', 'code']), ('origin__startswith', 'manage.py '), _connector='OR'), name='audit_origin_known'),
                ),
                migrations.AddConstraint(
                    model_name='studymembership',
                    constraint=models.UniqueConstraint(fields=('study', 'user'), name='one_membership_per_study_and_user'),
                ),
                migrations.AddConstraint(
                    model_name='studymembership',
                    constraint=models.CheckConstraint(condition=models.Q(('role__in', ['owner', 'researcher', 'viewer'])), name='membership_role_known'),
                ),
                migrations.AddConstraint(
                    model_name='studysystem',
                    constraint=models.UniqueConstraint(fields=('study', 'label'), name='unique_system_label'),
                ),
                migrations.AddConstraint(
                    model_name='studysystem',
                    constraint=models.UniqueConstraint(fields=('study', 'model_name', 'condition'), name='unique_system_design_cell'),
                ),
            ],
            database_operations=[],
        ),
    ]
