"""`kb stacks`: the Python stacks of the training processes (found in /proc, dumped with py-spy), grouped, and the rank that is not where its peers wait.

May import: the standard library only (it sits below kb.checks, whose doctor runs it). Arrows only go down (tests/test_packages.py).
"""
