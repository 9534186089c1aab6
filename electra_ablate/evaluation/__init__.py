"""Evaluation of kept encoders: the counterpart of ``objective.py`` + ``objectives/``."""
