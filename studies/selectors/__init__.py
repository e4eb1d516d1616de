"""Reads of a study's design, each scoped to who is asking; selectors import models only, never a service.

- `membership`: who may do what with a study (roles, actions, scoping querysets to the allowed studies).
- `audit`: the audit log rows a user may read, one study's filtered, and as CSV.

A study's progress and the language of its annotator pages read participations: annotation/selectors/study.py.
"""
