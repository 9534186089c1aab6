"""Kept encoders: what pre-training leaves for evaluation, and its exchange with Hugging Face.

- ``kept``: save and load a kept encoder, self-contained;
- ``kept_files``: a kept folder's files, checked without loading them;
- ``export``: a kept encoder in ``transformers``' ELECTRA format;
- ``hf_import``: an ELECTRA or BERT checkpoint from the hub as a kept encoder.
"""
