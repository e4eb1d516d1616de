"""The research outputs' S3 storage: django-storages' S3Storage, with download links signed for the address
browsers use (docs/deploy.md, "Object storage").

Inside a deployment the workers and web servers often reach the store by an internal name (``http://minio:9000``)
that no browser resolves. ``public_endpoint_url`` (``AWS_S3_PUBLIC_ENDPOINT_URL``) is the address browsers use:
a presigned download link is signed for that host (SigV4 signs the host, so a link cannot be rewritten after it
is signed); every upload, read and listing still goes to ``endpoint_url``.
"""

from __future__ import annotations

import threading
from typing import Any

from storages.backends.s3 import S3Storage
from storages.utils import clean_name


class ResearchS3Storage(S3Storage):
    def __init__(self, *, public_endpoint_url: str | None = None, **settings: Any) -> None:
        self.public_endpoint_url = public_endpoint_url or None
        self._public = threading.local()
        super().__init__(**settings)

    def _public_client(self) -> Any:
        client = getattr(self._public, "client", None)
        if client is None:
            client = self._create_session().client(
                "s3",
                region_name=self.region_name,
                use_ssl=self.use_ssl,
                endpoint_url=self.public_endpoint_url,
                config=self.client_config,
                verify=self.verify,
            )
            self._public.client = client
        return client

    def url(
        self,
        name: str,
        parameters: dict[str, Any] | None = None,
        expire: int | None = None,
        http_method: str | None = None,
    ) -> str:
        if self.public_endpoint_url is None or self.custom_domain or not self.querystring_auth:
            return str(super().url(name, parameters=parameters, expire=expire, http_method=http_method))
        params = {**(parameters or {}), "Bucket": self.bucket_name, "Key": self._normalize_name(clean_name(name))}
        return str(
            self._public_client().generate_presigned_url(
                "get_object",
                Params=params,
                ExpiresIn=self.querystring_expire if expire is None else expire,
                HttpMethod=http_method,
            )
        )

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_public", None)
        return dict(state)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._public = threading.local()
