"""The run layer: the host side of a run (devices and processes, the RunPlan, Anakin's host loop, Sebulba's threads,
host environments, checkpoints, lifetime, logging, playing and evaluation).

Its rule: a module here imports ``podracer.core`` and ``podracer.run``, never ``podracer.cli``: it reads no argv and
never the parser (``tests/test_structure.py``).
"""
