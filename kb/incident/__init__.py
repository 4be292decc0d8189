"""New cases from incidents: drafting from a log, signatures, naming, redaction, adding a signature to an existing case, where `kb new` may write.

May import: everything below it: kb.core ... kb.hangs, kb.checks. Arrows only go down (tests/test_packages.py).
"""
