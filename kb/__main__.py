"""`python -m kb`: the same entry point as the `kb` command."""

import sys

from .cli import main

sys.exit(main())
