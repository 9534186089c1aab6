"""GLUE as one task family: its tasks, data, metrics and published scores, and nothing else's.

- ``task``: the GLUE tasks and family (registered as ``glue``);
- ``data``: loading (hub, parquet folder or GLUE tsv), fingerprinting and encoding.
"""
