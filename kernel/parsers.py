"""The API's JSON parser: DRF's, refusing with 400 what could only fail later (too deep, unstorable)."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from kernel.storable import MAX_JSON_DEPTH, json_problem


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser (strict: no NaN or Infinity) that also refuses, as a 400 naming the place, a body
    nested more than MAX_JSON_DEPTH levels, a NUL character or lone surrogate in any string or key, and a
    number too large for a float (``1e400``)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep.") from None
        if problem := json_problem(data, where="body"):
            raise ParseError(f"JSON parse error - {problem}.")
        return data
