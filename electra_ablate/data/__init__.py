"""Data: corpus cleaning, WordPiece tokenizer, packed pre-training sequences, GLUE tasks."""
