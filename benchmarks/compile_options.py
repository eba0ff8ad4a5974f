"""XLA backend options against a whole short run: what compiling with less optimisation saves at launch, and what it
costs in steady-state speed, measured on both sides in the same launches.

    python benchmarks/compile_options.py                                  # cartpole and catch presets, 3 rounds
    python benchmarks/compile_options.py --presets cartpole --rounds 5 --save   # benchmarks/results/compile_options.*

Each launch is ``podracer anakin --preset P`` with an empty compilation cache and one setting of ``XLA_FLAGS``
(XLA's default, ``--xla_backend_optimization_level=1`` and ``=0``, ``--xla_llvm_disable_expensive_passes``,
JAX 0.10's ``--xla_cpu_use_fusion_emitters=false`` alone and with ``=0``: the tests' settings), the settings
alternating round by round. Read from the run's own lines: the start-up line's compile phase and its
update's XLA seconds, the closing line's steady-state env steps/s, and launch to exit. The last column is the
median over rounds of launch-to-exit against the default's in the same round: below 1, the option shortens the
whole run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _report

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = {
    "default": "",
    "O1": "--xla_backend_optimization_level=1",
    "O0": "--xla_backend_optimization_level=0",
    "no expensive LLVM passes": "--xla_llvm_disable_expensive_passes=true",
    # XLA:CPU's older fusion emitters (what tests/conftest.py sets on JAX 0.10; JAX 0.12's XLA no longer has them)
    "older fusion emitters": "--xla_cpu_use_fusion_emitters=false",
    "O0, older fusion emitters": "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false",
}


def known(flags: str) -> bool:
    """Whether the installed XLA takes ``flags`` (it aborts the process on a flag it does not know): the older
    fusion emitters are JAX 0.10's and earlier."""
    import importlib.metadata

    major, minor = (int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2])
    return "fusion_emitters" not in flags or (major, minor) < (0, 11)


def launch(preset: str, flags: str) -> dict:
    """One cold launch of ``--preset preset`` with ``XLA_FLAGS=flags``: its compile figures, speed and duration."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if flags:
        env["XLA_FLAGS"] = flags
    with tempfile.TemporaryDirectory(prefix="compile-options-") as cache:
        command = [sys.executable, "-m", "podracer.cli", "anakin", "--preset", preset, "--no-log-dir"]
        command += ["--compile-cache-dir", cache]
        start = time.monotonic()
        out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
        total = time.monotonic() - start
    if out.returncode != 0:
        raise SystemExit(f"compile_options: {' '.join(command)} failed: {out.stderr.strip().splitlines()[-1:]}")
    text = out.stdout + out.stderr
    compile_s = re.search(r"compile ([\d.]+) s", text)
    update_s = re.search(r"update ([\d.]+) s", text)
    sps = re.search(r"steady state ([\d,]+) env steps/s", text)
    return {
        "total_s": total,
        "compile_s": float(compile_s.group(1)) if compile_s else None,
        "update_xla_s": float(update_s.group(1)) if update_s else None,
        "sps": float(sps.group(1).replace(",", "")) if sps else None,
    }


def table(runs: list[dict], presets: list[str], rounds: int) -> str:
    loads = [r["load"] for r in runs]
    lines = [
        f"XLA backend options, cold launches of `podracer anakin --preset P`, on {_report.cpu_model()} "
        f"({os.cpu_count()} cores), load average {min(loads):.1f}-{max(loads):.1f}, {rounds} round(s); "
        f"`python benchmarks/{Path(__file__).name} {' '.join(sys.argv[1:])}` (medians over rounds)",
        "",
        "| preset | XLA_FLAGS | compile phase, s | update's XLA backend, s | steady state, env steps/s "
        "| launch to exit, s | launch to exit / default's (median of rounds) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for preset in presets:
        for name, flags in OPTIONS.items():
            mine = [r for r in runs if r["preset"] == preset and r["option"] == name]
            if not mine:
                lines.append(f"| {preset} | `{flags}` | not run: this XLA does not take it | | | | |")
                continue
            ratios = []
            for r in mine:
                base = [b for b in runs if (b["preset"], b["option"], b["round"]) == (preset, "default", r["round"])]
                ratios.append(r["total_s"] / base[0]["total_s"])

            def med(key, fmt, rows=mine):
                values = [r[key] for r in rows if r[key] is not None]
                return format(statistics.median(values), fmt) if values else "-"

            lines.append(
                f"| {preset} | `{flags or '(none)'}` | {med('compile_s', '.1f')} | {med('update_xla_s', '.1f')} | "
                f"{med('sps', ',.0f')} | {med('total_s', '.1f')} | "
                + (f"{statistics.median(ratios):.2f}" if name != "default" else "")
                + " |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="cartpole,catch", help="comma-separated presets")
    parser.add_argument("--rounds", type=int, default=3)
    _report.add_output_flags(parser, "compile_options")
    args = parser.parse_args()
    presets = [p for p in args.presets.split(",") if p]
    runs = []
    for r in range(args.rounds):
        names = [name for name, flags in OPTIONS.items() if known(flags)]
        order = names[r % len(names) :] + names[: r % len(names)]
        for preset in presets:
            for name in order:
                result = launch(preset, OPTIONS[name])
                runs.append({"round": r, "preset": preset, "option": name, "load": os.getloadavg()[0], **result})
                print(runs[-1], flush=True)
    print(table(runs, presets, args.rounds))
    data = {"cpu": _report.cpu_model(), "command": " ".join(sys.argv), "options": OPTIONS, "runs": runs}
    _report.save(_report.output_path(args.save, args.out, "compile_options"), table(runs, presets, args.rounds), data)


if __name__ == "__main__":
    main()
