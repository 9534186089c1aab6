"""A study's units spread over processes, machines and clusters, and their results brought back.

- ``runner``: ``run_study``, the whole job top to bottom: plan, share out, evaluate, tabulate;
- ``workers``: sharing units out to processes on one machine, with one progress line;
- ``launch``: units as cluster jobs (``--launcher``); ``shards``: one machine's share
  (``--shard I/N``);
- ``packs``: a study's results written as a pack to carry home;
- ``merge``: packs and study folders merged into one study;
- ``bundle``: data bundles written (``ablate data prepare --bundle``) for offline nodes;
- ``kit``: offline GPU-node kits (``ablate kit``).
"""
