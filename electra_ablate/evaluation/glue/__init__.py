"""GLUE as one task family: its tasks, data, metrics and published scores, and nothing else's.

- ``task``: the GLUE family (registered as ``glue``) and which tasks enter the GLUE score;
- ``data``: the nine tasks (fields, labels, layouts, metrics) and their data: loading (hub,
  parquet folder or GLUE tsv), fingerprinting and encoding;
- ``published``: the ELECTRA paper's Table 5 GLUE scores, printed beside measured ones.
- ``floors``: per task, the training examples seen under which every committed model
  predicted one class (the pre-flight check's threshold).
"""
