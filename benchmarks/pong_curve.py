"""Pong's training curve with ``--preset pong`` (PPO at CleanRL's ppo_atari_envpool.py settings), against env steps
and seconds, resumable across calls.

Each seed is the preset's 10M-step run (its learning rate decays over the 10M, as CleanRL's), stopped once it has
taken ``--env-steps`` (SIGTERM: the run checkpoints in ``--run-dir``); called again with the same ``--run-dir`` it
resumes there (``--resume auto``) and extends the curve, so a curve longer than one sitting is built in several.
The curve is read from the run's progress lines (``[  S s] | env steps N/... | return R``: the mean training return
of the episodes that ended in the window, as CleanRL's ``charts/episodic_return``).

    python benchmarks/pong_curve.py --env-steps 2000000 --seeds 0 1 2 --run-dir runs/pong-curve
    python benchmarks/pong_curve.py --env-steps 2000000 --cpu-layout ...   # 1 actor thread: a 2-core machine

``--cpu-layout`` keeps the preset's learning settings (32 envs x 128 steps an update, 16 minibatches) with one
actor thread and envpool's default threads, for a CPU of a few cores. The table and curve go to
``benchmarks/results/pong_curve.{json,md,png}``.

The source's curve: CleanRL reports Pong 20.45 +- 0.09 at 10M env steps over 3 seeds
(``docs/benchmark/ppo_atari_envpool.md`` at vwxyzjn/cleanrl fe8d8a0); its curve against env steps is published as an
image only (``docs/rl-algorithms/ppo.md`` links huggingface.co/datasets/cleanrl/benchmark, pr-424), so the table
quotes the final figure and reads no point of the curve off a picture.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = "CleanRL ppo_atari_envpool.py at fe8d8a0 (docs/benchmark/ppo_atari_envpool.md): 20.45 +- 0.09 at 10M, 3 seeds"
SOURCE_FINAL = 20.45
CPU_LAYOUT = ("--actor-threads", "1", "--envpool-threads", "0")
CHECKPOINT_EVERY_S = 600  # a call killed without its save (the OOM killer) loses at most this much training
CURVE_FILE = "pong_curve.json"  # in each seed's run folder: the curve so far and the seconds it took


def parse_progress(line: str) -> tuple[float, float, float | None] | None:
    """``(seconds, env steps, training return or None)`` of a progress line, else ``None``."""
    if not (line.startswith("[") and "| env steps" in line and "s]" in line):
        return None
    try:
        seconds = float(line[1:].split("s]")[0])
        steps = float(line.split("env steps")[1].split("/")[0].split()[0].replace(",", ""))
    except (IndexError, ValueError):
        return None
    value = line.split("| return")[1].split()[0] if "| return" in line else ""
    return seconds, steps, float(value) if value[:1] in "-0123456789" and value else None


def train_curve(
    command: list[str],
    run_dir: Path,
    *,
    stop_at_steps: float | None = None,
    stop_after_s: float | None = None,
    stop_at_return: float | None = None,
    env: dict | None = None,
    echo=print,
) -> dict:
    """Runs ``command`` (a ``podracer sebulba`` line; ``--log-dir``, ``--checkpoint-dir`` and ``--resume auto`` in
    ``run_dir`` are added) until it ends, has taken ``stop_at_steps`` env steps, its training return has reached
    ``stop_at_return``, or ``stop_after_s`` have passed (SIGTERM: it checkpoints and exits). Returns the whole
    curve, earlier calls' included: ``{"curve": [[env steps, seconds, return], ...], "seconds": the training
    seconds of every call, "first": where the return first reached 18, "exit": the command's status}``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    saved = run_dir / CURVE_FILE
    earlier = json.loads(saved.read_text()) if saved.is_file() else {"curve": [], "seconds": 0.0}
    offset = earlier["seconds"]
    resumed = checkpoint_env_steps(run_dir / "checkpoint")
    # A call killed without its save (the OOM killer, kill -9) ran past its newest checkpoint: the run goes on from
    # there, so the curve does too (its seconds keep the time spent), and the run logs to a record of its own.
    curve = [point for point in earlier["curve"] if resumed is not None and point[0] <= resumed]
    from podracer.run.logging import records_after

    log_dir, attempt = run_dir / "log", 1
    while resumed is not None and records_after(str(log_dir / "metrics.jsonl"), resumed):
        attempt += 1
        log_dir = run_dir / f"log_{attempt}"
    command = [*command, "--log-dir", str(log_dir), "--checkpoint-dir", str(run_dir / "checkpoint")]
    command += ["--resume", "auto", "--checkpoint-every-seconds", str(CHECKPOINT_EVERY_S)]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    stop = threading.Event()

    def terminate():
        if not stop.is_set():
            stop.set()
            proc.send_signal(signal.SIGTERM)  # the run checkpoints and exits

    timer = threading.Timer(stop_after_s, terminate) if stop_after_s else None
    if timer:
        timer.start()
    for line in proc.stdout:
        echo(line.rstrip("\n"))
        point = parse_progress(line)
        if point is None:
            continue
        seconds, steps, value = point
        if value is not None and (not curve or steps > curve[-1][0]):
            curve.append([steps, offset + seconds, value])
        if stop_at_steps is not None and steps >= stop_at_steps:
            terminate()
        if stop_at_return is not None and value is not None and value >= stop_at_return:
            terminate()
    proc.wait()
    if timer:
        timer.cancel()
    seconds = offset + time.perf_counter() - start
    result = {"curve": curve, "seconds": seconds, "first": first_reaching(curve, 18.0), "exit": proc.returncode}
    saved.write_text(json.dumps({"curve": curve, "seconds": seconds}))
    return result


def checkpoint_env_steps(directory: Path) -> float | None:
    """The env steps of the newest checkpoint in ``directory`` whose metadata reads (where a resume goes on from),
    else None."""
    for path in sorted(directory.glob("step_*.json"), key=lambda p: int(p.stem.split("_")[1]), reverse=True):
        try:
            return float(json.loads(path.read_text())["env_steps"])
        except (OSError, ValueError, KeyError):
            continue
    return None


def first_reaching(curve, target: float) -> dict | None:
    """The first point of ``curve`` whose return is at least ``target``: its env steps and seconds."""
    for steps, seconds, value in curve:
        if value >= target:
            return {"env_steps": steps, "seconds": seconds, "return": value}
    return None


def value_at(curve, steps: float) -> float | None:
    """The return of the last point of ``curve`` at or before ``steps`` env steps."""
    before = [value for at, _, value in curve if at <= steps]
    return before[-1] if before else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-steps", type=float, default=2_000_000, help="stop each seed here (default: 2M)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="seeds, one run each, in turn")
    parser.add_argument("--run-dir", default="runs/pong-curve", help="the runs' folders; a second call resumes them")
    parser.add_argument("--cpu-layout", action="store_true", help="one actor thread, envpool's default threads")
    parser.add_argument("--stop-after-s", type=float, help="also stop each seed after this many seconds of this call")
    parser.add_argument("--out", default=str(HERE / "results" / "pong_curve"), help="the table's path, no suffix")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    import _report

    runs = {}
    for seed in args.seeds:
        command = [sys.executable, "-m", "podracer.cli", "sebulba", "--preset", "pong", "--seed", str(seed)]
        command += list(CPU_LAYOUT) if args.cpu_layout else []
        runs[seed] = train_curve(
            command, Path(args.run_dir) / f"seed_{seed}", stop_at_steps=args.env_steps, stop_after_s=args.stop_after_s
        )
    marks = [m for m in (100_000, 250_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000) if m <= args.env_steps]
    reached = {seed: (run["curve"][-1][0] if run["curve"] else 0.0) for seed, run in runs.items()}
    lines = [
        f"Pong with --preset pong on {_report.machine()}{', --cpu-layout' if args.cpu_layout else ''}: the training "
        f"return (the window's finished episodes) at env steps; seeds {', '.join(map(str, runs))}",
        "",
        "| seed | " + " | ".join(f"{m / 1e6:g}M" for m in marks) + " | reached | seconds | env steps/s | first >= 18 |",
        "|---|" + "---:|" * (len(marks) + 4),
    ]
    for seed, run in runs.items():
        values = [value_at(run["curve"], m) if reached[seed] >= m else None for m in marks]
        first = run["first"]
        lines.append(
            f"| {seed} | "
            + " | ".join("–" if v is None else f"{v:.2f}" for v in values)
            + f" | {reached[seed]:,.0f} | {run['seconds']:,.0f} | {reached[seed] / max(run['seconds'], 1e-9):,.0f} | "
            + ("–" if first is None else f"{first['env_steps']:,.0f} steps, {first['seconds']:,.0f} s")
            + " |"
        )
    lines += ["", f"Source: {SOURCE}; its curve is an image (module docstring), so no point of it is quoted here."]
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps({"runs": runs, "source": SOURCE, "env_steps": args.env_steps}))
    _plot(runs, out.with_suffix(".png"))
    print(text)
    return 0


def _plot(runs: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for seed, run in runs.items():
        if run["curve"]:
            steps, _, values = zip(*run["curve"])
            ax.plot([s / 1e6 for s in steps], values, label=f"seed {seed}")
    ax.axhline(SOURCE_FINAL, ls="--", c="gray", label="CleanRL at 10M (20.45)")
    ax.axhline(18, ls=":", c="gray")
    ax.set(xlabel="env steps (M)", ylabel="training return", ylim=(-21.5, 21.5), title="Pong, --preset pong")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
