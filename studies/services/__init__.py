"""Every state change of a study's design, one module per entity (in the manner of Zulip's `zerver/actions/`).
Each service is keyword-only, typed and atomic where it writes; the admin, the admin API and annotation's services
import them from their entity's module. Listed in layer order: a module imports only those listed before it, so
there is no import cycle (tests/studies/test_layering.py holds it to that).

- `audit`: writing the audit log (who changed what in a study, before and after), called by the services of both
  apps in the transaction of the change they record.
- `study`: the default prompt template, a study's design check, creating it, setting its status, and
  the check that it is open for annotation.
- `invitation`: creating invitation links in bulk and changing one's limit, expiry or note (accepting one is
  annotation's participation service).
- `membership`: study membership, and the guarded writes of a study (its creator becomes its owner; only
  owners edit it; only superusers set a model server's address or a file path).
"""
