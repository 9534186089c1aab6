"""The objective axis: what an objective is, what it is built from, what it costs, how it trains.

- ``objective``: the objective contract, what an objective author implements;
- ``metric_names``: the metric-naming convention (a logged metric's kind, from its name);
- ``registry``: objectives found by entry-point name or import path, and built;
- ``departures``: an objective's params set away from the paper's values;
- ``config``: the spec's ``pretrain`` section (``PretrainSpec``), owned by the engine;
- ``components``: the pieces objectives are assembled from (masking, generators, heads, losses);
- ``flops``: training and inference FLOPs of an objective;
- ``flops_report``: an objective's FLOPs on a preset before anything trains (``ablate flops``);
- ``engine``: a FLOPs budget planned into steps and trained, resumably, on any objective;
- ``doctor``: what this machine offers a study, on one screen (``ablate doctor``).
"""
