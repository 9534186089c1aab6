"""The objective and task contracts as executable checks, for built-ins and plugins alike.

- ``checks``: ``check_objective`` and ``check_task`` (``ablate check`` runs them).
"""
