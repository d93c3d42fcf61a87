"""How the console offers an ADLS warehouse: the account, filesystem and folder, the
endpoint for emulators and private endpoints, and either credential (the account key or a
service principal); the API takes the rest."""

from __future__ import annotations

from icelog.commands.storage.kind import ConsoleForm, FormField

FORM = ConsoleForm(
    title="Azure Data Lake Storage Gen2",
    fields=(
        FormField("account-name", "Storage account", required=True),
        FormField("filesystem", "Filesystem (container)", required=True),
        FormField("key-prefix", "Key prefix"),
        FormField("endpoint", "Blob endpoint", placeholder="http://127.0.0.1:10000/<account>"),
        FormField("sas-enabled", "Vend SAS tokens", widget="checkbox"),
        FormField(
            "credential-type",
            "Credential",
            part="credential",
            widget="select",
            choices=(
                ("shared-access-key", "Account key"),
                ("client-credentials", "Service principal"),
            ),
        ),
        FormField("key", "Account key", part="credential", secret=True),
        FormField("client-id", "Client id (service principal)", part="credential"),
        FormField("tenant-id", "Tenant id (service principal)", part="credential"),
        FormField(
            "client-secret", "Client secret (service principal)", part="credential", secret=True
        ),
    ),
    credential={"type": "az"},
    note=(
        "Vended SAS tokens are scoped to one table's directory, which needs an account with "
        "a hierarchical namespace; emulators such as Azurite have none (see docs/storage.md)."
    ),
)
