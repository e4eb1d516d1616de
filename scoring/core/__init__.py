"""Pure-Python metric core of the scoring app: no Django imports, usable from a notebook.

Start at :mod:`scoring.core.api` (``metric_specs``, ``score_rows``, ``OFFLINE_METRICS``).
"""
