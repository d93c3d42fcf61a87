import sys

from icelog.api.cli import main

sys.exit(main())
