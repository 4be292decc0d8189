"""Locations, exit codes, atomic writes, configuration, text made safe to show, and fixed regexes compiled once.

May import: the standard library and third-party packages only. Arrows only go down (tests/test_packages.py).
"""
