"""The JSON shape of a research job, shared by the researcher pages' status poll and the researcher API."""

from __future__ import annotations

from typing import Any

from analysis.models import ResearchJob


def job_json(job: ResearchJob) -> dict[str, Any]:
    return {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "progress": job.progress,
        "stage": job.stage,
        "error": job.error,
        "files": job.files,
        "options": job.options,
        "created_at": job.created_at.isoformat(),
    }
