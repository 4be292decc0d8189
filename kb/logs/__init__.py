"""Whole logs: reduction to the failing rank's cause lines, the suspect rank, the stage reached, a good run as baseline, and the log search end to end.

May import: kb.core, kb.text, kb.cases, kb.index, kb.search. Arrows only go down (tests/test_packages.py).
"""
