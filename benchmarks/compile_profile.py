"""Where a cold start's compilation goes, program by program: tracing, lowering to MLIR and XLA's backend.

Each round launches ``podracer anakin --preset P`` in a fresh process with a fresh, empty compilation cache (what a
user's first launch, a CI job or a new setting of a sweep meets) and hears JAX's own timing of every program it
makes ready (``jax.monitoring``'s duration events: ``/jax/core/compile/jaxpr_trace_duration``,
``jaxpr_to_mlir_module_duration``, ``backend_compile_duration``, each with the program's name). The table gives,
per program, the median over rounds of each phase's seconds, and the run's start-up line (launch to the first
progress line). With ``--against REV`` the same launches run that revision's ``podracer/`` (taken out of git) too,
the two sides alternating round by round, and the table sets them side by side with the median of the per-round
ratios of their compile phases.

    python benchmarks/compile_profile.py                                  # the cartpole and catch presets
    python benchmarks/compile_profile.py --presets catch --rounds 5 --against HEAD~3
    python benchmarks/compile_profile.py --save                           # also benchmarks/results/compile_profile.*
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

PHASES = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "backend",
}
MARK = "compile_profile: "  # the child's last line: its measurements as JSON


def child(preset: str, devices: int, cache: str) -> None:
    """One launch, in this process: ``podracer anakin --preset PRESET`` with JAX's compile timing heard; prints the
    per-program phases and the start-up line as :data:`MARK` + JSON."""
    import contextlib
    import io

    import jax

    programs: dict[str, dict[str, float]] = {}

    def heard(event: str, duration: float, **fields) -> None:
        if event in PHASES:  # tracing names the function, lowering and the backend jit(function): one row
            name = re.sub(r"^jit\((.*)\)$", r"\1", str(fields.get("fun_name", "?")))
            entry = programs.setdefault(name, {"trace": 0.0, "lower": 0.0, "backend": 0.0})
            entry[PHASES[event]] += duration

    jax.monitoring.register_event_duration_secs_listener(heard)
    from podracer.cli import command as cli

    out = io.StringIO()
    argv = ["anakin", "--preset", preset, "--cpu-devices", str(devices), "--no-log-dir", "--compile-cache-dir", cache]
    with contextlib.redirect_stdout(out):
        status = cli.main(argv)
    lines = out.getvalue().splitlines()
    started = next((line.removeprefix("podracer: ") for line in lines if "started in " in line), "")
    found = re.search(r"started in ([0-9.]+) s.*compile ([0-9.]+) s", started)
    print(
        MARK
        + json.dumps(
            {
                "status": status,
                "programs": programs,
                "started_s": float(found.group(1)) if found else None,
                "compile_phase_s": float(found.group(2)) if found else None,
                "started": started,
                "last": lines[-1] if lines else "",
                "machine": _report.machine(),  # the launch's own devices
            }
        )
    )


def launch(source: Path | None, preset: str, devices: int) -> dict:
    """One cold launch of ``source``'s podracer (None: this checkout's) in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(source), env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory() as cache:
        command = [sys.executable, __file__, "--child", preset, "--devices", str(devices), "--cache", cache]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, cwd=tempfile.gettempdir())
    said = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
    if done.returncode or not said:
        raise SystemExit(f"compile_profile: the launch of --preset {preset} failed:\n{done.stderr[-2000:]}")
    result = json.loads(said[-1].removeprefix(MARK))
    if result["status"] != 0:
        raise SystemExit(f"compile_profile: --preset {preset} ended with status {result['status']}: {result['last']}")
    return result


def _median_programs(runs: list[dict]) -> dict[str, dict[str, float]]:
    names = sorted({name for run in runs for name in run["programs"]})
    return {
        name: {
            phase: statistics.median(run["programs"].get(name, {}).get(phase, 0.0) for run in runs)
            for phase in ("trace", "lower", "backend")
        }
        for name in names
    }


def _total(run: dict) -> float:
    return sum(sum(phases.values()) for phases in run["programs"].values())


def profile(presets: list[str], rounds: int, devices: int, against: str | None) -> dict:
    """Every preset's launches, ``rounds`` per side, the sides alternating (the first side alternates too)."""
    sides: dict[str, Path | None] = {"today": None}
    with tempfile.TemporaryDirectory() as folder:
        if against:
            commit = _report.resolve(against)
            _report.extract(commit, Path(folder))
            sides[commit[:10]] = Path(folder)
        runs: dict[str, dict[str, list[dict]]] = {p: {name: [] for name in sides} for p in presets}
        for preset in presets:
            for round_ in range(rounds):
                order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
                for name in order:
                    runs[preset][name].append(launch(sides[name], preset, devices))
                    print(f"{preset}, round {round_ + 1}, {name}: {runs[preset][name][-1]['started']}", flush=True)
    machine = runs[presets[0]]["today"][0]["machine"]
    out = {"machine": machine, "rounds": rounds, "devices": devices, "sides": list(sides), "presets": {}}
    for preset in presets:
        entry = {}
        for name in sides:
            done = runs[preset][name]
            entry[name] = {
                "programs": _median_programs(done),
                "compile_s": statistics.median(_total(run) for run in done),
                "started_s": statistics.median(run["started_s"] for run in done),
                "compile_phase_s": statistics.median(run["compile_phase_s"] for run in done),
                "rounds": done,
            }
        if len(sides) == 2:
            today, other = (runs[preset][name] for name in sides)
            entry["ratio"] = statistics.median(_total(b) / _total(a) for a, b in zip(today, other))
        out["presets"][preset] = entry
    return out


def table(result: dict) -> str:
    sides = result["sides"]
    lines = [
        f"Cold start, program by program, on {result['machine']}: `podracer anakin --preset P` with an empty "
        f"compilation cache, {result['devices']} CPU devices, median of {result['rounds']} launches per side"
        + (", the sides alternating" if len(sides) > 1 else "")
        + "; seconds of JAX's own timing (tracing, lowering to MLIR, XLA's backend).",
    ]
    for preset, entry in result["presets"].items():
        header = "| program | " + " | ".join(f"{s}: trace | {s}: lower | {s}: backend" for s in sides) + " |"
        lines += ["", f"### --preset {preset}", "", header, "|---|" + "---:|" * (3 * len(sides))]
        names = sorted(
            {n for s in sides for n in entry[s]["programs"]},
            key=lambda n: -sum(entry[sides[0]]["programs"].get(n, {}).values()),
        )
        for name in names:
            cells = []
            for s in sides:
                phases = entry[s]["programs"].get(name, {"trace": 0.0, "lower": 0.0, "backend": 0.0})
                cells += [f"{phases[p]:.2f}" for p in ("trace", "lower", "backend")]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
        for s in sides:
            side = entry[s]
            lines.append(
                f"- {s}: {side['compile_s']:.2f} s in {len(side['programs'])} programs; start-up "
                f"{side['started_s']:.1f} s to the first progress line, its compile phase "
                f"{side['compile_phase_s']:.1f} s"
            )
        if "ratio" in entry:
            lines.append(f"- {sides[1]} / today, compile seconds (median of per-round ratios): {entry['ratio']:.2f}x")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="cartpole,catch", help="comma-separated Anakin presets")
    parser.add_argument("--rounds", type=int, default=3, help="cold launches per preset and side")
    parser.add_argument("--devices", type=int, default=2, help="CPU devices of each launch (--cpu-devices)")
    parser.add_argument("--against", default=None, help="another revision, launched alternately with today's")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    _report.add_output_flags(parser, "compile_profile")
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.devices, args.cache)
        return 0
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}.")
    presets = [p.strip() for p in args.presets.split(",") if p.strip()]
    result = profile(presets, args.rounds, args.devices, args.against)
    text = table(result)
    print("\n" + text)
    _report.save(_report.output_path(args.save, args.out, "compile_profile"), text, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
