"""The kernel's one written SQL read (the API's token and its user) and the helpers every app's `queries.py`
writes its statements with.

The ORM is the rule (docs/architecture.md, "Reads"); a statement is written out only on a hot path where
bench/queries.py measures the ORM's read at 1.3x its CPU or more, and lives in its app's `queries.py`, held to
the ORM read it stands for by a test. Names in the SQL come from the models' metadata, values are bound
parameters; the helpers build model instances as the ORM would (`instances_from_row`)."""

from __future__ import annotations

import functools
from typing import Any, cast

from django.contrib.auth import get_user_model
from django.db import connection, models
from rest_framework.authtoken.models import Token


def model_columns(model: type[models.Model], keep: set[str] | None = None) -> list[str]:
    """The attribute names of `model`'s columns in `keep` (all without it), in the model's column order, which
    is the order `Model.from_db` takes the values in (the key first)."""
    return [f.attname for f in model._meta.concrete_fields if keep is None or f.attname in keep]


# A plain-SQL read's columns: per joined table its model, its alias in the statement and the columns read.
RowShape = list[tuple[type[models.Model], str, list[str]]]


def select_list(shape: RowShape) -> str:
    """The SELECT list of `shape`'s columns, quoted, in order."""
    q = connection.ops.quote_name
    column = {(model, f.attname): str(f.column) for model, _, _ in shape for f in model._meta.concrete_fields}
    return ", ".join(f"{alias}.{q(column[model, name])}" for model, alias, names in shape for name in names)


def column(model: type[models.Model], name: str) -> str:
    """The quoted column of `model`'s field `name` (a relation's name gives its key column)."""
    field = model._meta.get_field(name)
    return connection.ops.quote_name(str(getattr(field, "column")))  # noqa: B009 - a reverse relation has none


def for_update_of(*aliases: str) -> str:
    """The lock clause of `select_for_update(of=...)` for the tables read as `aliases`: their rows alone
    locked until the transaction ends; empty where the database has none (SQLite, whose writes are
    serialised by the database lock instead)."""
    features = connection.features
    if not (features.has_select_for_update and features.has_select_for_update_of):
        return ""
    return f" FOR UPDATE OF {', '.join(aliases)}"


def _converters(model: type[models.Model], names: tuple[str, ...]) -> list[tuple[int, list[Any], Any]]:
    """The columns among `names` whose values the ORM converts after reading, with the converters it applies
    (the database backend's, then the field's), as `SQLCompiler.get_converters` finds them: JSON read as
    text everywhere; on SQLite also times (stored naive, read aware), booleans and decimals."""
    return _converters_for(connection.vendor, model, names)


@functools.cache
def _converters_for(vendor: str, model: type[models.Model], names: tuple[str, ...]) -> list[tuple[int, list[Any], Any]]:
    fields = {f.attname: f for f in model._meta.concrete_fields}
    out = []
    for i, name in enumerate(names):
        expression = fields[name].get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
        if found:
            out.append((i, found, expression))
    return out


def _convert(values: list[Any], converters: list[tuple[int, list[Any], Any]]) -> None:
    for i, found, expression in converters:
        for convert in found:
            values[i] = convert(values[i], expression, connection)


def instances_from_row(row: tuple[Any, ...], shape: RowShape) -> list[Any]:
    """One model instance per table of `shape` from a plain-SQL row, with only those columns loaded (others
    load on access, as deferred fields do); None for a table an outer join found no row of (a NULL key)."""
    out: list[Any] = []
    at = 0
    for model, _, names in shape:
        values = list(row[at : at + len(names)])
        at += len(names)
        if values[0] is None:
            out.append(None)
            continue
        _convert(values, _converters(model, tuple(names)))
        out.append(model.from_db(connection.alias, names, values))
    return out


def fetch_one(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    """The first row of a written statement, None for none."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row: tuple[Any, ...] | None = cursor.fetchone()
    return row


def fetch_all(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Every row of a written statement."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


@functools.cache
def _rows_by_sql(model: type[models.Model], names: tuple[str, ...], column: str, order_by: str) -> str:
    q = connection.ops.quote_name
    fields = {f.attname: f for f in model._meta.concrete_fields}
    select = ", ".join(q(str(fields[name].column)) for name in names)
    # Names from the model's metadata; the value is a bound parameter.
    return (
        f"SELECT {select} FROM {q(model._meta.db_table)}"  # noqa: S608
        f" WHERE {q(str(fields[column].column))} = %s ORDER BY {q(str(fields[order_by].column))}"
    )


def rows_by(
    model: type[models.Model], names: tuple[str, ...], *, column: str, value: Any, order_by: str
) -> list[tuple[Any, ...]]:
    """`model.objects.filter(<column>=value).order_by(order_by).values_list(*names)` as one written statement:
    the same tuples, JSON columns decoded as the ORM decodes them (`order_by` must be unique among the rows,
    or their order is the database's)."""
    rows = fetch_all(_rows_by_sql(model, names, column, order_by), [value])
    converters = _converters(model, names)
    if not converters:
        return rows
    out = []
    for row in rows:
        values = list(row)
        _convert(values, converters)
        out.append(tuple(values))
    return out


@functools.cache
def _token_shape() -> RowShape:
    user = get_user_model()
    return [(Token, "t", model_columns(Token)), (user, "u", model_columns(user))]


@functools.cache
def _token_sql() -> str:
    q = connection.ops.quote_name
    user = get_user_model()
    # Names from the models' metadata; the key is a bound parameter.
    return (
        f"SELECT {select_list(_token_shape())} FROM {q(Token._meta.db_table)} t"  # noqa: S608
        f" INNER JOIN {q(user._meta.db_table)} u ON u.{column(user, cast(Any, user._meta.pk).name)} = t.{column(Token, 'user')}"
        f" WHERE t.{column(Token, 'key')} = %s"
    )


def token_with_user(*, key: str) -> Token | None:
    """The API token `key` with its user, every column of both, as DRF's `select_related("user").get(key=...)`
    reads them; None when there is none. Every API request authenticates by token: bench/queries.py, "token
    and its user" (the ORM's read 2.1x the CPU); held to DRF's read in tests/kernel/test_authentication.py."""
    row = fetch_one(_token_sql(), [key])
    if row is None:
        return None
    token, user = instances_from_row(row, _token_shape())
    token.user = user
    return cast(Token, token)
