"""Running a case's checks on this node: plan, containment, the reaper, what the node has, the doctor, the environment report, the history of runs.

May import: kb.core, kb.text, kb.cases, kb.index, kb.search, kb.logs, kb.hangs. Arrows only go down (tests/test_packages.py).
"""
