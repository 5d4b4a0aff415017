"""`python -m charter`: the `charter` command, for an environment whose scripts are not
on PATH."""

from __future__ import annotations

import sys

from api.cli import main

if __name__ == "__main__":
    sys.exit(main())
