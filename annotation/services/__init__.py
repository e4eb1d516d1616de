"""Every state change of the annotators' work, one module per entity (in the manner of Zulip's `zerver/actions/`).
Each service is keyword-only, typed and atomic where it writes; views, the API, admin and tasks
import them from their entity's module. Listed in layer order: a module imports only those listed
before it, so there is no import cycle (tests/annotation/test_module_layers.py holds it to that).

The study's design (audit log, study, invitations, membership) is studies/services/, below these.

- `participation`: invitations (checking a link, accepting or joining it idempotently)
  and a participation's questions used and finish (which is also "stop the study").
- `quality`: attention checks (inserting one into a bracket, counting failures), the study's check policy
  (screening a participation out), and a researcher's manual exclusion of a participation and its undo.
- `persona`: the annotator's self-description, versioned until the first question.
- `tally`: a study's pair tallies, which the adaptive design reads to choose a question's next pair and adds each
  answer to.
- `tournament`: drawing a query's bracket (or, under the adaptive design, choosing each next pair),
  creating and advancing matches, marking a match shown,
  and recording a choice (`judgment_record`; `judgment_record_as` for the API, `judgment_record_on_page` for
  the comparison page).
- `generation`: claiming, generating, failing and retrying candidate summaries, the sweeper for
  stuck ones, and drawing the bracket once every candidate of a query is done.
- `query`: asking a question, retrieving its sources, failing, discarding (setting aside), resending
  stuck work and retrying it, and marking its waiting page shown.
- `prewritten`: studies of pre-written outputs: importing items and outputs from a file (checked by line and
  field), and giving an annotator the next item as a question whose bracket is drawn at once.
"""
