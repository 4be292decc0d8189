"""`kb doctor --ray`: a task per node, what each node runs, the per-node report and its differences.

May import: everything below it: kb.core ... kb.incident. Arrows only go down (tests/test_packages.py).
"""
