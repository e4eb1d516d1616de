"""The corpus's change token: a row rewritten by triggers on every insert, update or delete of a document.

PostgreSQL: one statement-level trigger (a bulk import of 2,000 rows changes the token once per batch).
SQLite: row-level triggers (SQLite has no statement-level ones).
"""

from django.db import migrations, models

TABLE = "corpus_corpusdocument"
STATE = "corpus_corpusstate"

PG_FORWARD = [
    f"INSERT INTO {STATE} (id, token) VALUES (1, md5(random()::text || clock_timestamp()::text))",  # noqa: S608
    f"""CREATE FUNCTION corpus_state_bump() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE {STATE} SET token = md5(random()::text || clock_timestamp()::text) WHERE id = 1;
        RETURN NULL;
    END $$""",  # noqa: S608
    f"""CREATE TRIGGER corpus_state_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {TABLE}
        FOR EACH STATEMENT EXECUTE FUNCTION corpus_state_bump()""",
]
PG_BACKWARD = [
    f"DROP TRIGGER IF EXISTS corpus_state_bump ON {TABLE}",
    "DROP FUNCTION IF EXISTS corpus_state_bump()",
]

_SQLITE_BUMP = f"UPDATE {STATE} SET token = lower(hex(randomblob(16))) WHERE id = 1;"  # noqa: S608
SQLITE_FORWARD = [
    f"INSERT INTO {STATE} (id, token) VALUES (1, lower(hex(randomblob(16))))",  # noqa: S608
    *(
        f"CREATE TRIGGER corpus_state_{name} AFTER {event} ON {TABLE} BEGIN {_SQLITE_BUMP} END"
        for name, event in (("ai", "INSERT"), ("au", "UPDATE"), ("ad", "DELETE"))
    ),
]
SQLITE_BACKWARD = [f"DROP TRIGGER IF EXISTS corpus_state_{name}" for name in ("ai", "au", "ad")]


def forward(apps, schema_editor):
    statements = {"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}.get(schema_editor.connection.vendor, [])
    with schema_editor.connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


def backward(apps, schema_editor):
    statements = {"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}.get(schema_editor.connection.vendor, [])
    with schema_editor.connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("corpus", "0003_lexeme_stats")]

    operations = [
        migrations.CreateModel(
            name="CorpusState",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ("token", models.CharField(max_length=64)),
            ],
        ),
        migrations.RunPython(forward, backward, elidable=False),
    ]
