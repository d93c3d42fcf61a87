"""How the console offers an `s3` warehouse: the fields a first S3 or S3-compatible
warehouse needs (the API takes the rest)."""

from __future__ import annotations

from icelog.commands.storage.kind import ConsoleForm, FormField

FORM = ConsoleForm(
    title="S3 or S3-compatible",
    fields=(
        FormField("bucket", "Bucket", required=True),
        FormField("region", "Region", placeholder="us-east-1", required=True),
        FormField("key-prefix", "Key prefix"),
        FormField("endpoint", "Endpoint", placeholder="https://minio.example:9000"),
        FormField(
            "flavor", "Flavor", widget="select", choices=(("", "aws"), ("s3-compat", "s3-compat"))
        ),
        FormField("path-style-access", "Path-style access", widget="checkbox"),
        FormField("access-key-id", "Access key id", part="credential"),
        FormField("secret-access-key", "Secret access key", part="credential", secret=True),
    ),
    credential={"type": "s3", "credential-type": "access-key"},
    note=(
        "The key is stored encrypted outside the event log; the catalog checks that it can "
        "write and read the storage before it creates the warehouse."
    ),
)
