"""BERT WordPiece tokenization built on HF ``tokenizers``; vocabulary loading and checks."""
