"""Env steps/s against the number of environments, both modes, as one picture for the docs.

Sebulba: ``benchmarks/sebulba_throughput.py`` measured now, PPO on envpool CartPole with one actor thread, at each
``--envs`` (environments per actor thread), end-to-end while learning. Anakin: the rows of
``benchmarks/results/anakin_throughput.json`` (``python benchmarks/anakin_throughput.py --save``: A2C and PPO on
CartPole on every device, environments per device), read as saved, with the machine they name. Prints a Markdown
table; ``--save`` writes ``benchmarks/results/scaling.{md,json,png}``.

    python benchmarks/scaling.py --envs 8,16,32,64,128 --updates 40 --save
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

RESULTS = Path(__file__).parent / "results"


def sebulba_rows(envs: list[int], updates: int) -> list[dict]:
    import sebulba_throughput  # benchmarks/sebulba_throughput.py

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in envs:
            out = Path(folder) / f"sebulba_{n}"
            flags = ["--env", "CartPole", "--agent", "ppo", "--num-envs-per-actor", str(n), "--updates", str(updates)]
            sebulba_throughput.main([*flags, "--no-log-dir", "--out", str(out)])
            rows.append(json.loads(out.with_suffix(".json").read_text())["row"])
    return rows


def anakin_rows() -> tuple[str, list[dict]]:
    saved = json.loads((RESULTS / "anakin_throughput.json").read_text())
    rows = [
        r for r in saved["rows"] if r["env"] == "cartpole" and r["devices"] == max(x["devices"] for x in saved["rows"])
    ]
    return f"{saved['machine']}, jax {saved['jax']}", rows


def plot(sebulba: list[dict], anakin: list[dict], path: Path, machines: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4))
    for agent in sorted({r["agent"] for r in anakin}):
        mine = sorted((r for r in anakin if r["agent"] == agent), key=lambda r: r["total_envs"])
        ax.plot(
            [r["total_envs"] for r in mine], [r["sps"] for r in mine], "o-", label=f"Anakin {agent}, CartPole (JAX)"
        )
    mine = sorted(sebulba, key=lambda r: r["num_envs"])
    ax.plot(
        [r["num_envs"] for r in mine], [r["end_to_end_sps"] for r in mine], "s-", label="Sebulba ppo, envpool CartPole"
    )
    ax.plot(
        [r["num_envs"] for r in mine],
        [r["envpool_ceiling_sps"] for r in mine],
        ":",
        color="grey",
        label="envpool alone (random actions)",
    )
    ax.set(xscale="log", yscale="log", xlabel="environments (all devices)", ylabel="env steps/s while learning")
    ax.set_title(machines, fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="8,16,32,64,128", help="Sebulba's environments per actor thread")
    parser.add_argument("--updates", type=int, default=40, help="learner updates per Sebulba measurement")
    _report.add_output_flags(parser, "scaling")
    args = parser.parse_args(argv)
    envs = [int(n) for n in args.envs.split(",") if n.strip()]
    if not envs or min(envs) < 1:
        parser.error(f"--envs takes positive integers, got {args.envs!r}.")
    sebulba = sebulba_rows(envs, args.updates)
    import jax

    here = f"{_report.machine()}, jax {jax.__version__}"
    there, anakin = anakin_rows()
    lines = ["| mode | agent | environments | env steps/s | measured on |", "|---|---|---:|---:|---|"]
    lines += [f"| Anakin | {r['agent']} | {r['total_envs']} | {r['sps']:,.0f} | {there} |" for r in anakin]
    lines += [f"| Sebulba | ppo | {r['num_envs']} | {r['end_to_end_sps']:,.0f} | {here} |" for r in sebulba]
    text = "Env steps/s against environments, CartPole, both modes\n\n" + "\n".join(lines) + "\n"
    print("\n" + text)
    out = _report.output_path(args.save, args.out, "scaling")
    _report.save(out, text, {"anakin_machine": there, "sebulba_machine": here, "anakin": anakin, "sebulba": sebulba})
    if out is not None:
        plot(sebulba, anakin, out.with_suffix(".png"), f"Anakin: {there}\nSebulba: {here}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
