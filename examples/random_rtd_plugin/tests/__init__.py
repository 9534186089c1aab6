"""Tests of the random_rtd plugin (a package, so that its test modules never clash by name
with electra-ablate's own when both suites are collected in one pytest run)."""
