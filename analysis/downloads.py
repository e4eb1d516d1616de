"""Serving a research job's output file from the research storage: streamed, or a presigned redirect. A store that
fails is a 503 with its reason (kernel/storage.py), never a 500 with botocore's message."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage
from django.http import FileResponse, Http404, HttpResponseBase, HttpResponseRedirect

from kernel.storage import storage_reasons

__all__ = ["DOWNLOAD_AGAIN", "stored_file_response"]

# How a reason for a store that failed a download ends, once an administrator has fixed it.
DOWNLOAD_AGAIN = "then download the file again"


def stored_file_response(storage: Storage, key: str, name: str, *, as_attachment: bool) -> HttpResponseBase:
    """The object at `key` as a download named after `name`; a redirect to a presigned URL when
    RESEARCH_DOWNLOAD_REDIRECT is set and the storage is not a local folder; 404 if it vanished."""
    filename = PurePosixPath(name).name
    if settings.RESEARCH_DOWNLOAD_REDIRECT and not isinstance(storage, FileSystemStorage):
        disposition = "attachment" if as_attachment else "inline"
        parameters = {"ResponseContentDisposition": f'{disposition}; filename="{filename}"'}
        try:
            url = storage.url(key, parameters=parameters)  # type: ignore[call-arg]  # django-storages' S3 signature
        except TypeError:
            url = storage.url(key)
        return HttpResponseRedirect(url)
    try:
        with storage_reasons(storage, then=DOWNLOAD_AGAIN):
            handle = storage.open(key, "rb")
    except (FileNotFoundError, OSError) as error:
        raise Http404(
            f"The file {name!r} is no longer on the server (not in the research storage); run the job again."
        ) from error
    return FileResponse(handle, as_attachment=as_attachment, filename=filename)
