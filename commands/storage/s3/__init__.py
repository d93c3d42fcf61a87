"""The `s3` storage kind (AWS S3 and S3-compatible stores): the adapter (`objects`), profile
and credential checks (`profile`), STS vending (`vending`) and remote signing (`signing`,
`addressing`)."""

from __future__ import annotations

from icelog.commands.storage.s3.kind import S3Kind

# Re-exported: the S3 adapter's names were imported from this path when it was one module.
from icelog.commands.storage.s3.objects import S3Access as S3Access
from icelog.commands.storage.s3.objects import S3FileIO as S3FileIO
from icelog.commands.storage.s3.objects import client_for as client_for
from icelog.commands.storage.s3.objects import split_location as split_location

KIND = S3Kind()
