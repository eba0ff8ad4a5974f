"""What every benchmark script shares: naming the machine, and saving a table with its data."""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import tarfile
import time
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's processor string elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> str:
    """``host: device kind xN [backend], C cores of CPU model`` (call after JAX's device count is settled)."""
    import jax

    from podracer.run import parallel

    return (
        f"{platform.node()}: {jax.devices()[0].device_kind} x{jax.device_count()} [{jax.default_backend()}], "
        f"{parallel.available_cores()} cores of {cpu_model()}"
    )


def compile_anakin(
    env,
    agent,
    optimizer,
    *,
    num_envs: int,
    rollout_length: int,
    updates_per_call: int,
    devices,
    seed: int = 0,
    warm_up: list | None = None,
):
    """``(compiled, state, compile seconds)``: Anakin's update mapped over ``devices`` (``parallel.device_map``),
    ``updates_per_call`` updates scanned per call, compiled ahead of time (``lower().compile()``, timed apart)
    for the state :func:`podracer.anakin.init` makes from ``seed``; the state has had one warm-up call, whose
    metrics are appended to ``warm_up`` when given (what the first call from scratch trained to)."""
    import jax

    from podracer import anakin, parallel  # the faces: compare_commits.py runs this against other revisions too

    update = anakin.make_update(env, agent, optimizer, rollout_length=rollout_length)
    p_multi = parallel.device_map(anakin.make_multi_update(update, updates_per_call), devices)
    state = anakin.init(env, agent, optimizer, jax.random.key(seed), num_envs, devices, rollout_length=rollout_length)
    jax.block_until_ready(state)

    start = time.perf_counter()
    compiled = p_multi.lower(state).compile()
    compile_seconds = time.perf_counter() - start
    state, metrics = compiled(state)  # warm-up call
    jax.block_until_ready(metrics)
    if warm_up is not None:
        warm_up.append(metrics)
    return compiled, state, compile_seconds


def time_anakin(
    env, agent, optimizer, *, num_envs: int, rollout_length: int, updates_per_call: int, devices, calls: int
) -> tuple[float, float]:
    """``(compile seconds, median seconds per host call)`` of :func:`compile_anakin`'s program: one warm-up
    call, then ``calls`` timed calls, each scanning ``updates_per_call`` updates."""
    import jax

    compiled, state, compile_seconds = compile_anakin(
        env,
        agent,
        optimizer,
        num_envs=num_envs,
        rollout_length=rollout_length,
        updates_per_call=updates_per_call,
        devices=devices,
    )
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        state, metrics = compiled(state)
        jax.block_until_ready(metrics)
        seconds.append(time.perf_counter() - start)
    return compile_seconds, statistics.median(seconds)


RESULTS = Path(__file__).parent / "results"


def add_output_flags(parser, name: str) -> None:
    """``--save`` (write ``benchmarks/results/NAME.{md,json}``) and ``--out PATH`` (write ``PATH.{md,json}``):
    a benchmark prints its table and writes files only when asked, so a run leaves the checkout as it was."""
    parser.add_argument(
        "--save", action="store_true", help=f"also write the table to benchmarks/results/{name}.{{md,json}}"
    )
    parser.add_argument(
        "--out", default=None, help="write the table to OUT.{md,json} instead (a path without extension)"
    )


def output_path(save: bool, out: str | None, name: str) -> Path | None:
    """Where a table goes: ``out``; else ``benchmarks/results/NAME`` when ``save``; else nowhere (``None``)."""
    if out:
        return Path(out)
    return RESULTS / name if save else None


def save(out: str | Path | None, text: str, data: dict) -> None:
    """Writes ``out.md`` (``text``) and ``out.json`` (``data``), creating the folder, and says so; nothing when
    ``out`` is ``None`` (:func:`output_path`)."""
    if out is None:
        return
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(data, indent=1))
    print(f"saved {out.with_suffix('.md')} and {out.with_suffix('.json')}")


REPO = Path(__file__).resolve().parent.parent


def resolve(rev: str, flag: str = "--against") -> str:
    """The full commit hash of ``rev``, or a one-line exit naming ``flag``."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode:
        raise SystemExit(f"{flag}: {rev!r} is not a commit of {REPO}.")
    return found.stdout.strip()


def extract(commit: str, folder: Path) -> None:
    """``commit``'s ``podracer/`` package, written under ``folder`` (put ``folder`` first on a process's path to
    run that revision)."""
    archive = folder / "source.tar"
    with archive.open("wb") as f:
        subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "podracer"], stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
