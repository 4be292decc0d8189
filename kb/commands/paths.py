"""`kb paths`: where kb reads and writes."""

from __future__ import annotations

import argparse
import os

from kb.cases.caseset import case_layers
from kb.core import paths


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("paths", help="print the folders kb uses")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for layer in case_layers():
        print(f"cases ({layer.source}):".ljust(18) + f"{layer.path}")
    print(f"index:            {paths.default_index_dir()}")
    print(f"data (history):   {paths.data_dir()}")
    print(f"cache:            {paths.cache_dir()}")
    print(f"config:           {paths.config_dir() / 'config.toml'}")
    print(f"model override:   {os.environ.get('KB_MODEL_DIR', '(none: packaged all-MiniLM-L6-v2)')}")
    return 0
