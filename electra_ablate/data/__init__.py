"""Pre-training data: the corpus, the tokenizer, packed sequences, batches, reading a bundle.

- ``config``: the spec's ``data`` section (``DataSpec``);
- ``paths``: where data and the cache live, and content hashes;
- ``corpus``: corpus sources, cleaning and the held-out split;
- ``tokenizer``: the WordPiece tokenizer, trained or read;
- ``packing``: documents packed into fixed-length sequences;
- ``pretraining``: the prepared (cached) training and held-out sets, and their unigram
  ``data_vocab``;
- ``batches``: seeded, sharded batches of packed sequences;
- ``bundle``: reading a data bundle on an offline node (``electra_ablate.scaleout.bundle`` writes
  one).
"""
