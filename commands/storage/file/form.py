"""How the console offers a `file` warehouse."""

from __future__ import annotations

from icelog.commands.storage.kind import ConsoleForm, FormField

FORM = ConsoleForm(
    title="Local directory",
    fields=(
        FormField(
            "base-location", "Base location", placeholder="file:///var/lib/lake", required=True
        ),
    ),
)
