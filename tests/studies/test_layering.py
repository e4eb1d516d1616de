"""studies/ sits below annotation/: its service modules are layered among themselves, its selectors import no
service, and what it names of annotation's models without importing them (studies/admin.py,
studies/services/membership.py) is what annotation's models say."""

from __future__ import annotations

from pathlib import Path

from django.apps import apps

import studies
from annotation.models import Candidate, Participation
from studies.admin import PREVIEW_SOURCE
from studies.models import Study, StudySystem
from studies.services.membership import DELETED_ROW_NAMED_BY
from tests.annotation.test_module_layers import _module_level_imports

ROOT = Path(studies.__file__).parent
# Bottom up, as studies/services/__init__.py lists them.
SERVICE_LAYERS = ["audit", "study", "invitation", "membership"]


def _modules(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")


def test_every_service_module_is_in_a_layer():
    assert sorted(p.stem for p in _modules("services")) == sorted(SERVICE_LAYERS)


def test_a_service_imports_only_the_services_below_it():
    for path in _modules("services"):
        below = SERVICE_LAYERS[: SERVICE_LAYERS.index(path.stem)]
        imported = {
            name.split(".")[2]
            for name in _module_level_imports(path)
            if name.startswith("studies.services.") and name.count(".") == 2
        }
        assert imported <= set(below), f"{path.stem} imports {sorted(imported - set(below))}"


def test_selectors_import_no_service():
    for path in _modules("selectors"):
        assert not {name for name in _module_level_imports(path) if name.startswith("studies.services")}, path.stem


def test_what_studies_names_of_annotation_is_there():
    assert PREVIEW_SOURCE == Participation.Source.PREVIEW
    for model_name, fields in DELETED_ROW_NAMED_BY.items():
        model = {"participation": Participation}.get(model_name) or _studies_model(model_name)
        assert all(model._meta.get_field(field) for field in fields)
    # The reverse relations studies reads by name: a system's candidates (study_has_candidates) and a study's
    # participations (the admin's participant count).
    assert StudySystem._meta.get_field("candidates").related_model is Candidate
    assert Study._meta.get_field("participations").related_model is Participation


def _studies_model(name: str):
    return apps.get_model("studies", name)
