"""How the console offers a GCS warehouse: the bucket and folder, the endpoints for an
emulator, and the service-account key file pasted whole; the API takes the rest."""

from __future__ import annotations

from icelog.commands.storage.kind import ConsoleForm, FormField

FORM = ConsoleForm(
    title="Google Cloud Storage",
    fields=(
        FormField("bucket", "Bucket", required=True),
        FormField("key-prefix", "Key prefix (folder in the bucket)"),
        FormField("sts-enabled", "Vend downscoped tokens", widget="checkbox"),
        FormField("endpoint", "JSON API endpoint (emulators only)"),
        FormField("sts-endpoint", "Token exchange (STS) URL (emulators only)"),
        FormField(
            "key",
            "Service-account key (the JSON key file)",
            part="credential",
            widget="json",
            secret=True,
            required=True,
        ),
    ),
    credential={"type": "gcs", "credential-type": "service-account-key"},
    note=(
        "Unticked, vending is off: clients then need their own access to the bucket. The key "
        "is stored encrypted outside the event log."
    ),
)
