"""Reads for the annotator journey and the admin pages, each scoped to who is asking, one module per
entity like `annotation.services`; callers import them from their entity's module. Selectors import
models only, never a service.

- `participation`: the asking annotator's own participation in a study.
- `study`: a study's progress per participation, and the language of its annotator pages.
- `query`: the annotator's own query by number, the one being worked on, and a query's frozen sources.
- `generation`: anonymous per-candidate progress for the waiting page, and the failed candidates.
- `tournament`: the match to answer next and how far through the bracket the annotator is.

Who may do what with a study, and the audit log's reads, are studies/selectors/.
"""
