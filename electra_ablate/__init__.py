"""electra-ablate: controlled ablations of text-encoder pre-training objectives at equal FLOPs.

The package is built in wings, lowest first, each importing only the wings below it (the order
is ``electra_ablate.infra.layers.LAYERS``; ``tests/test_layout.py`` holds every import to it):

- ``infra``: storage, locks, manifests, errors, threads, layout, identities, tables, progress;
- ``backbone``: the one encoder, its config and vocabulary;
- ``data``: the pre-training corpus, tokenizer, packing, batches and data bundles;
- ``checkpoints``: kept encoders, their files, export to and import from Hugging Face;
- ``pretraining``: the objective axis (contract, components, FLOPs, the engine);
- ``evaluation``: the task axis (contract, fine-tuning, GLUE, probes);
- ``conformance``: the objective and task contracts as executable checks;
- ``analysis``: results tables, statistics, the paper's claims;
- ``spec``: the study spec, its YAML validated, with its variants and overrides;
- ``study``: one study on one machine: a spec planned into units, each done, checked and
  tabulated; a study folder surveyed, cleaned, its data prepared;
- ``scaleout``: a study over processes, machines and clusters (``run_study``), its results
  packed and merged, data bundles and offline GPU-node kits;
- ``report``: ``report.md``, figures and comparisons;
- ``api``: the stable face for notebooks: a study's numbers and figures as its report makes them;
- ``plugin``: the one face for plugin authors;
- ``objectives``: the built-in objectives, one file each (the repository's ``objectives/``);
- ``commands`` and ``cli`` (with ``__main__``, for ``python -m electra_ablate``): the ``ablate``
  command, thin adapters over the wings.

Importing the package imports nothing else: each wing is imported where it is used.
"""

__version__ = "0.4.0"
