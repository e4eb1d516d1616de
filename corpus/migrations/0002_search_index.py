"""The full-text index of the corpus, written per database because Django has no portable one.

PostgreSQL: a stored generated tsvector column (title weighted above abstract) with a GIN index.
SQLite: an external-content FTS5 table kept in step with the rows by triggers (skipped when the
SQLite build has no FTS5; search then falls back to BM25 over a LIKE-filtered candidate set).
"""

from django.db import migrations

TABLE = "corpus_corpusdocument"
FTS = "corpus_document_fts"

PG_FORWARD = [
    f"""ALTER TABLE {TABLE} ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
        || setweight(to_tsvector('english'::regconfig, coalesce(abstract, '')), 'B')
    ) STORED""",
    f"CREATE INDEX corpus_document_search_gin ON {TABLE} USING GIN (search_vector)",
]
PG_BACKWARD = [
    "DROP INDEX IF EXISTS corpus_document_search_gin",
    f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS search_vector",
]

SQLITE_FORWARD = [
    f"""CREATE VIRTUAL TABLE {FTS} USING fts5(
        title, abstract, content='{TABLE}', content_rowid='id', tokenize='porter unicode61'
    )""",
    f"""CREATE TRIGGER {FTS}_ai AFTER INSERT ON {TABLE} BEGIN
        INSERT INTO {FTS}(rowid, title, abstract) VALUES (new.id, new.title, new.abstract);
    END""",
    f"""CREATE TRIGGER {FTS}_ad AFTER DELETE ON {TABLE} BEGIN
        INSERT INTO {FTS}({FTS}, rowid, title, abstract) VALUES ('delete', old.id, old.title, old.abstract);
    END""",
    f"""CREATE TRIGGER {FTS}_au AFTER UPDATE OF title, abstract ON {TABLE} BEGIN
        INSERT INTO {FTS}({FTS}, rowid, title, abstract) VALUES ('delete', old.id, old.title, old.abstract);
        INSERT INTO {FTS}(rowid, title, abstract) VALUES (new.id, new.title, new.abstract);
    END""",
    f"INSERT INTO {FTS}({FTS}) VALUES ('rebuild')",
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {FTS}_ai",
    f"DROP TRIGGER IF EXISTS {FTS}_ad",
    f"DROP TRIGGER IF EXISTS {FTS}_au",
    f"DROP TABLE IF EXISTS {FTS}",
]


def _sqlite_has_fts5(cursor) -> bool:
    try:
        cursor.execute("CREATE VIRTUAL TABLE temp._corpus_fts5_probe USING fts5(x)")
        cursor.execute("DROP TABLE temp._corpus_fts5_probe")
    except Exception:
        return False
    return True


def forward(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            statements = PG_FORWARD
        elif connection.vendor == "sqlite" and _sqlite_has_fts5(cursor):
            statements = SQLITE_FORWARD
        else:
            statements = []
        for sql in statements:
            cursor.execute(sql)


def backward(apps, schema_editor):
    connection = schema_editor.connection
    statements = {"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}.get(connection.vendor, [])
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("corpus", "0001_initial")]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
