"""The research outputs' S3 storage: django-storages' S3Storage, with download links signed for the address
browsers use (docs/deploy.md, "Object storage").

Inside a deployment the workers and web servers often reach the store by an internal name (``http://minio:9000``)
that no browser resolves. ``public_endpoint_url`` (``AWS_S3_PUBLIC_ENDPOINT_URL``) is the address browsers use:
a presigned download link is signed for that host (SigV4 signs the host, so a link cannot be rewritten after it
is signed); every upload, read and listing still goes to ``endpoint_url``.

A call the store fails is said as a reason a researcher can act on (`storage_reasons`, docs/deploy.md, "When the
store fails"): which bucket or setting, never the endpoint's address (botocore's own messages carry the internal
URL) or a credential; a transient fault (no answer, a time-out, a 5xx, throttling) is marked as worth trying again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from botocore import exceptions as boto
from django.core.files.storage import Storage
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from kernel.exceptions import ApplicationError


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


class StorageUnavailable(ApplicationError):
    """A call to the research storage failed; `message` is the reason to show, `transient` whether trying again
    later may succeed. A 503 where a request meets it (the kernel's handler)."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message, status=503)
        self.transient = transient


@contextmanager
def storage_reasons(storage: Storage, *, then: str) -> Iterator[None]:
    """Turn botocore's errors inside the block into `StorageUnavailable` (the original chained, for the log);
    `then` ends a reason that needs an administrator: what the researcher does once it is fixed."""
    try:
        yield
    except (boto.ClientError, boto.BotoCoreError) as error:
        raise storage_fault(error, storage, then=then) from error


# Error codes a store answers while it is overloaded or restarting (botocore's standard retry mode treats them so).
_THROTTLED = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequestsException",
     "RequestLimitExceeded", "BandwidthLimitExceeded", "RequestTimeout", "RequestTimeoutException",
     "PriorRequestNotComplete", "InternalError", "ServiceUnavailable"}
)  # fmt: skip
_REFUSED = frozenset({"AccessDenied", "AllAccessDisabled", "AccountProblem", "InvalidObjectState", "403"})
_ELSEWHERE = frozenset({"PermanentRedirect", "AuthorizationHeaderMalformed", "IllegalLocationConstraintException"})


def storage_fault(error: BaseException, storage: Storage, *, then: str) -> StorageUnavailable:
    """What `error`, raised by a call to `storage`, means for the person who asked: a reason naming the bucket and
    the setting to look at (docs/deploy.md, "Object storage"), and whether it may pass by itself."""
    bucket = f"'{getattr(storage, 'bucket_name', '')}'"
    config = getattr(storage, "client_config", None)
    store = "the store at AWS_S3_ENDPOINT_URL" if getattr(storage, "endpoint_url", None) else "Amazon S3"

    def transient(what: str) -> StorageUnavailable:
        return StorageUnavailable(
            f"The research storage {what}: if it goes on, an administrator should check that {store} is running "
            "and that the servers reach it.",
            transient=True,
        )

    def permanent(what: str, fix: str) -> StorageUnavailable:
        return StorageUnavailable(
            f"The research storage {what}. An administrator must {fix} (docs/deploy.md, 'Object storage'); {then}.",
            transient=False,
        )

    if isinstance(error, boto.ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        if code in _THROTTLED or status >= 500 or status == 429:
            return transient(f"answered with a temporary error ({code or 'no code'}, HTTP {status})")
        if code == "NoSuchBucket":
            return permanent(
                f"has no bucket {bucket} (AWS_STORAGE_BUCKET_NAME)", "create it, or set the name of the bucket to use"
            )
        if code in ("InvalidAccessKeyId", "InvalidToken", "ExpiredToken"):
            return permanent(
                f"does not accept the access key in AWS_ACCESS_KEY_ID ({code})",
                f"set the key and secret (AWS_SECRET_ACCESS_KEY) of an account that may write to the bucket {bucket}",
            )
        if code == "SignatureDoesNotMatch":
            return permanent(
                "refused the secret key: AWS_SECRET_ACCESS_KEY is not the secret of the key in AWS_ACCESS_KEY_ID",
                "set the secret that belongs to the key",
            )
        if code in _REFUSED:
            return permanent(
                f"refused these credentials access to the bucket {bucket} "
                f"({code if code != '403' else 'HTTP 403: an unknown key, a wrong secret or no permission'})",
                "give the account of AWS_ACCESS_KEY_ID PutObject, GetObject, ListBucket and DeleteObject on the bucket",
            )
        if code in _ELSEWHERE:
            return permanent(
                f"says the bucket {bucket} is in another region than AWS_S3_REGION_NAME ({code})",
                "set AWS_S3_REGION_NAME to the bucket's region",
            )
        return permanent(
            f"refused the request to the bucket {bucket} ({code or 'no code'}, HTTP {status})",
            "read the worker's or web server's log for the cause and fix it",
        )
    if isinstance(error, boto.SSLError):
        return permanent(
            "could not set up a secure connection (TLS)",
            "check AWS_S3_ENDPOINT_URL's scheme and the store's certificate",
        )
    if isinstance(error, boto.ReadTimeoutError):
        seconds = getattr(config, "read_timeout", None)
        return transient(
            f"did not answer within {seconds:g} s (AWS_S3_READ_TIMEOUT_S)" if seconds else "did not answer"
        )
    if isinstance(error, boto.ConnectTimeoutError):
        seconds = getattr(config, "connect_timeout", None)
        return transient(
            f"did not take a connection within {seconds:g} s (AWS_S3_CONNECT_TIMEOUT_S)"
            if seconds
            else "did not connect"
        )
    if isinstance(error, boto.ConnectionError | boto.HTTPClientError):
        return transient("could not be reached (the connection was refused or dropped)")
    if isinstance(error, boto.NoCredentialsError | boto.PartialCredentialsError | boto.CredentialRetrievalError):
        return permanent(
            "has no credentials to use", "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or give the host a role)"
        )
    return permanent(f"could not be used ({type(error).__name__})", "read the worker's log for the cause and fix it")
