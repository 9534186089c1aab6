"""The built-in objectives. Each registers through the ``electra_ablate.objectives`` entry-point
group in pyproject.toml, exactly as a third-party package would."""
