"""kb: an offline knowledge base of error cases for LLM post-training.

Importing this package is cheap on purpose: torch, sentence-transformers,
onnxruntime and faiss are imported only by the modules that need them, when
they need them (a test proves that `import kb` does not import torch).
"""

__version__ = "0.1.0"
