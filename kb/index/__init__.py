"""What is stored and how it is kept true: the documents the scorers see, BM25 and FAISS files, the embedding model and its ONNX export, the encoder, atomic generations.

May import: kb.core, kb.text, kb.cases. Arrows only go down (tests/test_packages.py).
"""
