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
- ``study``: a spec run as units, jobs and tables; folders checked, bundled, packed, merged;
- ``report``: ``report.md``, figures and comparisons;
- ``api``: the stable face for notebooks: a study's numbers and figures as its report makes them;
- ``plugin``: the one face for plugin authors;
- ``objectives``: the built-in objectives, one file each (the repository's ``objectives/``);
- ``commands`` and ``cli``: the ``ablate`` command, thin adapters over the wings.
"""

from electra_ablate.infra import moved

__version__ = "0.3.0"

moved.install()
