"""electra-ablate: controlled ablations of text-encoder pre-training objectives at equal FLOPs."""

__version__ = "0.2.0"
