"""Probes: what a frozen kept encoder makes linearly readable, fitting nothing inside it.

- ``frozen_features``: what a frozen encoder computes, batched;
- ``linear_probe``: logistic-regression probes on those features;
- ``glue_probe``: linear probes on GLUE (registered as ``glue_probe``);
- ``rtd_probe``: replaced-token detection on frozen features (registered as ``rtd_probe``);
- ``corruption_sources``: the fixed corruption sources the RTD probe detects;
- ``reference_detectors``: detectors that learn nothing from a model, to read a score against.
"""
