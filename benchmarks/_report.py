"""What every benchmark script shares: naming the machine, and saving a table with its data."""

from __future__ import annotations

import json
import platform
from pathlib import Path


def machine() -> str:
    """``host: device kind xN [backend], C cores`` (call after JAX's device count is settled)."""
    import jax

    from podracer import parallel

    return (f"{platform.node()}: {jax.devices()[0].device_kind} x{jax.device_count()} [{jax.default_backend()}], "
            f"{parallel.available_cores()} cores")


def save(out: str | Path, text: str, data: dict) -> None:
    """Writes ``out.md`` (``text``) and ``out.json`` (``data``), creating the folder, and says so."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1))
    print(f"saved {out.with_suffix('.md')} and {out.with_suffix('.json')}")
