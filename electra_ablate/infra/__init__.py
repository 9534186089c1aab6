"""Infrastructure every wing stands on, knowing nothing of objectives, tasks or studies.

- ``errors``: the one error type a user can cause, and "did you mean";
- ``spec_model``: the base of every spec model (unknown keys refused, no boolean read as a
  number, no infinity);
- ``storage``: atomic writes;
- ``locks``: one writer per folder, naming its holder;
- ``device_gate``: one process at a time trains on a shared card while others compile
  (``ABLATE_DEVICE_GATE``);
- ``manifest``: sha256 manifests of a folder's files;
- ``threads``: torch's process-wide thread count, set and restored;
- ``layout``: where a study's outputs live, every path built in one place;
- ``identity``: what enters a run id and a job id (``config_hash``, ``IDENTITY_EXCLUDED``);
- ``code_identity``: which code computed a result, recorded beside its id
  (``code_fingerprint``), and what changed since (``code_difference``);
- ``tables``: terminal tables that never cut a name;
- ``progress``: progress lines on stderr (live on a terminal, plain in logs);
- ``archives``: the one bounded, checked, streaming reader of archives from elsewhere (packs,
  compile caches, kept parts);
- ``compile_cache``: torch's compile caches in one folder (``ABLATE_COMPILE_CACHE``), and the
  archive that carries it from one stretch of GPU time to the next;
- ``entry_points``: the installed objectives, task families and trackers, scanned once per
  process;
- ``tracking``: the experiment trackers a spec names (TensorBoard, W&B, MLflow, a third
  party's), each behind one fail-safe face;
- ``layers``: the wings in layer order, which ``tests/test_layout.py`` holds the imports to.
"""
