"""The case file format and where cases come from: front matter, parsing, typed parameters, case sets and layers, provenance, workspace trust, the generated overview.

May import: kb.core, kb.text. Arrows only go down (tests/test_packages.py).
"""
