"""`kb paths`: where kb reads and writes."""

from __future__ import annotations

import argparse
import os

from .. import paths
from ..caseset import case_folders


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("paths", help="print the folders kb uses")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(f"built-in cases: {paths.builtin_cases_dir()}")
    for f in case_folders()[1:]:
        print(f"extra cases:    {f}  (KB_CASES)")
    print(f"index:          {paths.default_index_dir()}")
    print(f"data (history): {paths.data_dir()}")
    print(f"cache:          {paths.cache_dir()}")
    print(f"model override: {os.environ.get('KB_MODEL_DIR', '(none: packaged all-MiniLM-L6-v2)')}")
    return 0
