"""A paste to typed lines and tokens: signal lines, the BM25 tokenizer, variable tokens, regex analysis, which software stack a paste comes from, the user's own words.

May import: kb.core. Arrows only go down (tests/test_packages.py).
"""
