"""The objective axis: what an objective is, what it is built from, what it costs, how it trains.

- ``objective``: the objective contract and its entry-point registry;
- ``config``: the spec's ``pretrain`` section (``PretrainSpec``), owned by the engine;
- ``components``: the pieces objectives are assembled from (masking, generators, heads, losses);
- ``flops``: training and inference FLOPs of an objective;
- ``engine``: a FLOPs budget planned into steps and trained, resumably, on any objective.
"""
