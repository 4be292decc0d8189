"""Locations, exit codes, atomic writes, configuration, and text made safe to show.

May import: the standard library and third-party packages only. Arrows only go down (tests/test_packages.py).
"""
