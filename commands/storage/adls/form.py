"""What the web console asks for an ADLS warehouse: (field, label, kind, required) rows, the
profile's fields first, then each credential type's. `kind` is text, number, checkbox or
secret (never echoed back into a page)."""

from __future__ import annotations

from typing import Literal

FieldKind = Literal["text", "number", "checkbox", "secret"]
FormField = tuple[str, str, FieldKind, bool]

PROFILE_FORM: list[FormField] = [
    ("account-name", "Storage account", "text", True),
    ("filesystem", "Filesystem (container)", "text", True),
    ("key-prefix", "Key prefix", "text", False),
    ("host", "DFS host (default dfs.core.windows.net)", "text", False),
    ("endpoint", "Blob endpoint URL (emulators, private endpoints)", "text", False),
    ("authority-host", "Entra ID authority host", "text", False),
    ("sas-enabled", "Vend SAS tokens", "checkbox", False),
    ("sas-token-validity-seconds", "SAS token validity (seconds)", "number", False),
    ("allow-alternative-protocols", "Allow wasbs:// locations", "checkbox", False),
]

CREDENTIAL_FORMS: dict[str, list[FormField]] = {
    "shared-access-key": [("key", "Account key", "secret", True)],
    "client-credentials": [
        ("client-id", "Client id", "text", True),
        ("tenant-id", "Tenant id", "text", True),
        ("client-secret", "Client secret", "secret", True),
    ],
}

FORM: list[FormField] = PROFILE_FORM + [
    field for fields in CREDENTIAL_FORMS.values() for field in fields
]
