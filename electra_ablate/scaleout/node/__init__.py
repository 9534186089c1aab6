"""What runs on an offline GPU node, carried there in the project's wheel by ``ablate kit``
(``electra_ablate.scaleout.kit``); the recipe is ``docs/gpu-node.md``.

- ``node.sh`` (package data): the script a kit's user runs on the node: sets the kit up, then
  doctor, CUDA tests, bench, a whole session or one shard of the study;
- ``session``: one stretch of lent GPU time in one command (``node.sh KIT OUT session``);
  standard library and the kit's standard-library-only modules;
- ``pretrain_throughput``: tokens/s of one ELECTRA pre-training step, ours against the peers
  (``bench/pretrain_throughput.py`` runs it here);
- ``finetune_throughput``: examples/s of the fine-tuning step, eager, compiled and as CUDA
  graphs (``bench/finetune_throughput.py`` runs it here);
- ``step_profile``: what bounds a step, read from a profiler trace (kernels, launches, host
  syncs, the card's busy time);
- ``measure``: what the benches share (synthetic packed batches, the engine's optimizer
  settings, step timing, peak matmul rate, memory high-water marks, host operation counts).
"""
