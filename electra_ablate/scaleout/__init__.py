"""A study's units spread over processes, machines and clusters, and their results brought back.

- ``runner``: ``run_study``, the whole job top to bottom: plan, share out, evaluate, tabulate;
- ``workers``: sharing units out to processes on one machine, with one progress line;
- ``launch``: units as cluster jobs (``--launcher``); ``shards``: one machine's share
  (``--shard I/N``);
- ``packs``: a study's results written as a pack to carry home;
- ``merge``: packs and study folders merged into one study;
- ``bundle``: data bundles written (``ablate data prepare --bundle``) for offline nodes;
- ``kit``: offline GPU-node kits (``ablate kit``);
- ``node``: what a kit runs on the node, carried in the wheel: ``node.sh``, the session
  and the throughput benches;
- ``kept_parts``: a cut run's kept encoders sent back from a GPU session in checksummed parts,
  and rebuilt beside a study; standard library only;
- ``replay``: a GPU session's study command replayed on one card, its time model fitted to
  the committed stretches (``reports/gpu_sessions``); standard library only.
"""
