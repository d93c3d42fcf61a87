"""What the web console asks for a GCS warehouse: (field, label, input kind, required),
input kinds being text, number, checkbox, secret and textarea. The registry turns these
into its form; credential fields are write-only (never shown back)."""

from __future__ import annotations

from typing import Literal

FieldKind = Literal["text", "number", "checkbox", "secret", "textarea"]
FormField = tuple[str, str, FieldKind, bool]

PROFILE_FORM: list[FormField] = [
    ("bucket", "Bucket", "text", True),
    ("key-prefix", "Key prefix (folder in the bucket)", "text", False),
    ("sts-enabled", "Vend downscoped tokens to clients", "checkbox", False),
    ("endpoint", "JSON API endpoint (emulators only)", "text", False),
    ("sts-endpoint", "Token exchange (STS) URL", "text", False),
]

# The key file's JSON, pasted whole: `GcsCredential.key` reads the text as its object.
CREDENTIAL_FORM: list[FormField] = [
    ("key", "Service-account key (the JSON key file)", "textarea", True),
]

FORM: list[FormField] = PROFILE_FORM + CREDENTIAL_FORM
