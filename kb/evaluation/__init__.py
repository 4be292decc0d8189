"""Measuring kb: Recall@k and coverage on labelled queries, whole-log figures, calibration.

May import: everything below it: kb.core ... kb.cluster. Arrows only go down (tests/test_packages.py).
"""
