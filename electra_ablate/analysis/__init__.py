"""From a study's tidy tables to statistics and the paper's claims.

- ``table_schemas``: the columns and types of the tidy tables;
- ``results``: the results table and the per-arm statistics reports read;
- ``stats``: confidence intervals, paired differences, verdicts and seed plans;
- ``efficiency``: compute multipliers and crossovers of score-vs-FLOPs curves, with CIs;
- ``paper``: the ELECTRA paper's reference numbers and claims.
"""
