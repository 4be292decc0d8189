"""`python -m kb`: the same entry point as the `kb` command."""

import sys

from kb.cli import main

sys.exit(main())
