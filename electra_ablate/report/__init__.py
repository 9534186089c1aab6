"""Reports: ``report.md``, its figures and ``ablate compare``, made from a study's tables.

- ``document``: ``write_report``, the whole ``report.md`` of one study, top to bottom;
- ``source``: a study folder or a report folder, read; the tables kept beside the report;
- ``lead``: "At a glance", the first screen: the plan's outcome, the headline comparison,
  what is unresolved and why;
- ``header``: provenance, recipe, deviations from the paper, the tables kept;
- ``scores``: one set of sections per task family in the results, GLUE's or any other's (and
  ``summary.csv`` beside ``report.md``);
- ``verdicts``: scores and paired differences with CIs, the paper's claims and seed plans;
- ``efficiency``: the compute-efficiency section and figure (multipliers and crossovers);
- ``pretraining``: the diagnostics of every run (learning speed, nats learnt, AUC);
- ``plots``: the figures; ``markdown``: tables and numbers as markdown;
- ``compare``: ``ablate compare``, the same objectives across studies.

A notebook gets the report's numbers and figures from ``electra_ablate.api``, the stable face;
the modules here may move between versions.
"""

from electra_ablate.report.compare import write_comparison
from electra_ablate.report.document import writable_folder, write_report

__all__ = ["writable_folder", "write_comparison", "write_report"]
