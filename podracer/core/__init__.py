"""The core layer: pure functions of arrays (types, networks, optimizers, replay, the learner step, normalisation,
statistics, sweeps and populations, Anakin's pure half, the agents, the JAX environments and the suites' adapters).

Its rule: a module here imports nothing outside ``podracer.core``, at import time and in every function-level import
(``tests/test_structure.py``); no threads, files, clocks or argv.
"""
