"""The generation backend of a system whose outputs a lab wrote beforehand (docs/backends.md, "Pre-written
studies"): its texts are imported with `manage.py import_outputs`, so it serves any model name and writes nothing."""

from __future__ import annotations

from kernel.backends import BackendError, Generation, GenerationRequest


class PrewrittenOutputs:
    def generate(self, request: GenerationRequest) -> Generation:
        raise BackendError(
            "This system's outputs are imported (manage.py import_outputs); it writes none of its own.",
            transient=False,
        )
