"""Scorers, fusion, evidence and confidence: the Engine that answers a paste.

May import: kb.core, kb.text, kb.cases, kb.index. Arrows only go down (tests/test_packages.py).
"""
