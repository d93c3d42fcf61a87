"""The management API's shapes of a GCS profile and credential (Lakekeeper's field names).

They check shape only, like the other management bodies: what the values mean (bucket
rules, URLs, the key itself) is checked by `profile.py`, which takes the validated body as
a plain dict. A model's repr never shows the private key.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictStr

from icelog.commands.storage.shapes import ProfileBody, StorageBody, optional

_URL = "^$|^https?://[^/?#@]+(/[^?#]*)?$"


class GcsProfile(ProfileBody):
    """A GCS bucket (or a folder of it). Stored (and returned) with every field present,
    defaults filled in. At creation and update the server gets a token with the key, then
    writes, reads, lists and deletes a probe object (and exchanges a token once when
    `sts-enabled`); a failing step is a 400."""

    type: Literal["gcs"]
    bucket: StrictStr = Field(
        description="A GCS bucket name: 3-63 lowercase letters, digits, '-', '_' or '.' "
        "(up to 222 with dots), starting and ending with a letter or digit",
        json_schema_extra={"pattern": "^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$"},
    )
    key_prefix: StrictStr | None = optional(
        "Folder of the warehouse in the bucket; outer '/' are dropped and no part may be "
        "empty, '.' or '..'; no ', % or \\. Default: the whole bucket (stored as \"\")."
    )
    sts_enabled: StrictBool | None = optional(
        "Vend downscoped tokens (GCS STS with a Credential Access Boundary) to clients; "
        "default true"
    )
    endpoint: StrictStr | None = optional(
        "The GCS JSON API root the catalog and the clients use (an http(s) URL); default "
        "https://storage.googleapis.com. Set it for an emulator (fake-gcs-server).",
        pattern=_URL,
    )
    sts_endpoint: StrictStr | None = optional(
        "The token exchange URL for vending; default https://sts.googleapis.com/v1/token",
        pattern=_URL,
    )
    base_location: StrictStr | None = optional(
        "`gs://<bucket>[/<key-prefix>]`, set by the server (ignored in requests)", readOnly=True
    )
    credential_id: UUID | None = optional(
        "The sealed credential's id, set by the server (ignored in requests); the key itself "
        "is never returned",
        readOnly=True,
    )


class GcsServiceKey(BaseModel):
    """A service-account key file's JSON object, with Google's own (snake_case) names.
    Fields a newer key file may add are ignored, not refused."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["service_account"]
    project_id: StrictStr
    private_key_id: StrictStr
    private_key: StrictStr = Field(repr=False)  # never in a log line
    client_email: StrictStr
    client_id: StrictStr | None = None
    auth_uri: StrictStr | None = None
    token_uri: StrictStr | None = Field(
        default=None, description="Default https://oauth2.googleapis.com/token"
    )
    auth_provider_x509_cert_url: StrictStr | None = None
    client_x509_cert_url: StrictStr | None = None
    universe_domain: Literal["googleapis.com"] | None = None


def _pasted_key(value: Any) -> Any:
    """A key file's text (as pasted in a form) is read as its JSON object."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("not a service-account key (a JSON object)") from None
    return value


class GcsCredential(StorageBody):
    """A service-account key (Lakekeeper's `service-account-key` credential). The server's
    own GCP identity (`gcp-system-identity`) is not supported."""

    type: Literal["gcs"]
    credential_type: Literal["service-account-key"]
    key: Annotated[GcsServiceKey, BeforeValidator(_pasted_key)]
