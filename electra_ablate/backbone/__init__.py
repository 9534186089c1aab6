"""The one encoder every objective is built from.

- ``config``: ``BackboneConfig`` and the named presets;
- ``tokens``: special-token ids and the vocabulary a backbone is sized by;
- ``model``: the encoder itself, readable top to bottom.
"""
