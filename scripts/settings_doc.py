"""Write docs/settings.md, the settings reference, from the table of settings
(api/settings_table.py): one row per environment variable, by section.

    .venv/bin/python scripts/settings_doc.py            # writes docs/settings.md
    .venv/bin/python scripts/settings_doc.py --check    # exit 1 when it is not up to date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from icelog.api.settings import PREFIX
from icelog.api.settings_table import SECTIONS, SETTINGS

OUTPUT = Path(__file__).resolve().parents[1] / "docs" / "settings.md"

INTRO = f"""# Settings

All settings are environment variables with the prefix `{PREFIX}`; only `api/settings.py`
reads them, by the table in `api/settings_table.py`, from which this page is generated
(`scripts/settings_doc.py`; do not edit it by hand). Flags of `icelog serve` override host,
port and workers. A malformed or out-of-bounds value stops every `icelog` command at start-up
with a message naming the variable (exit status 2).
"""


def render() -> str:
    out = [INTRO]
    for section in SECTIONS:
        out += [f"## {section}", "", "| variable | kind | default | meaning |", "|---|---|---|---|"]
        out += [
            f"| `{PREFIX}{s.name}` | {s.kind.describe()} | {s.default_text()} | {s.doc} |"
            for s in SETTINGS
            if s.section == section
        ]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    document = render()
    if args.check:
        if OUTPUT.read_text(encoding="utf-8") != document:
            print(f"{OUTPUT} is out of date: run scripts/settings_doc.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(document, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
