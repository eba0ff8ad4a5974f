"""The benchmark scripts (``benchmarks/NAME.py``) as modules, for the tests that check their tables and parsers."""

import importlib
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name: str):
    """``benchmarks/NAME.py`` as a module (its folder on the path while it imports, as when it runs)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))
