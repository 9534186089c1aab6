"""From a study's tidy tables to statistics and the paper's claims.

- ``table_schemas``: the columns and types of the tidy tables;
- ``results``: the results table and the per-arm statistics reports read;
- ``stats``: confidence intervals, paired differences, verdicts and seed plans;
- ``efficiency``: compute multipliers and crossovers of score-vs-FLOPs curves, with CIs;
- ``paper``: the ELECTRA paper's reference numbers and claims;
- ``deviations``: how a spec departs from the paper (the report's header, the trackers' config).

A notebook gets these numbers as a report prints them from ``electra_ablate.api``, the stable
face; the modules here may move between versions.
"""
