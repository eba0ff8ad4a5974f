"""A reproduction row's source, its own code run here: on the table's seeds and budget, scored as it scored its figure.

Where a row of ``reproduce.py``'s table falls short of its published figure, the question a reviewer asks is whether
the figure is one the source's own code reaches on other seeds. This script answers it for three sources, each run
from a copy of its repository made here at the commit the table quotes, on the table's seeds (100-104):

- rl-baselines3-zoo (``benchmark.md``: one trained agent per row): the zoo's ``train.py`` with the row's algorithm
  and environment (the zoo's hyperparameters for them), then the saved agent played as ``rl_zoo3/benchmark.py``
  plays it (``enjoy.py`` for 150,000 env steps, one environment, deterministic actions, seed 0, the final model).
- gymnax-blines (the checkpoints gymnax's README quotes): ``train.py -config agents/ENV/ppo.yaml -seed S``, the
  command of its ``exec.sh train`` that writes the quoted ``ppo.pkl`` (its ``-lr`` default, 5e-4, replaces the
  yaml's learning-rate schedule: ``utils/helpers.load_config`` sets ``lr_begin`` and ``lr_end`` to it), then the
  saved network played by its own ``RolloutManager.batch_evaluate`` over ``num_test_rollouts`` (164) episodes,
  sampled actions.
- CleanRL (its MuJoCo PPO rows, ``docs/benchmark/ppo_continuous_action.md``: the mean over 3 seeds of each run's
  training return over its last 100 episodes): ``cleanrl/ppo_continuous_action.py --env-id ENV --seed S --no-cuda``
  with its defaults (1M env steps), one thread (``OMP_NUM_THREADS=1``, as ``benchmark/ppo.sh`` runs it), scored by
  the returns of the last 100 episodes it prints.

Each row reports the interquartile mean of the seeds' returns with its 95 % bootstrap interval, and how far that went
from random play to the published figure (``reproduce.normalized``, random play the row's own measurement in
``reproduce.json``).

Each source runs in a Python of its own. The zoo (``--zoo-python``; ``--zoo-git``, a git directory of
DLR-RM/rl-baselines3-zoo):

    python -m venv /tmp/zoo-venv && /tmp/zoo-venv/bin/pip install torch "stable-baselines3>=2.9.0a2,<3" \\
        "sb3_contrib>=2.9.0a2,<3" "gymnasium>=0.29.1,<1.3" "huggingface_sb3>=3,<4" pyyaml optuna rich tqdm \\
        pytablewriter pandas matplotlib
    python benchmarks/source_runs.py --zoo-python /tmp/zoo-venv/bin/python --zoo-git PATH/rl-baselines3-zoo.git
    python benchmarks/source_runs.py ... --rows mountaincar-dqn --seeds 2 --eval-steps 20000   # a quick look
    python benchmarks/source_runs.py ... --save     # benchmarks/results/source_runs.{md,json}; the table reads it
    python benchmarks/source_runs.py --render       # the saved table beside today's reproduce.json

gymnax-blines (``--blines-python``; ``--blines-git``, a git directory of RobertTLange/gymnax-blines), in the JAX of
its time, with evosax's ``NetworkMapper`` and TFP's JAX substrate:

    python -m venv /tmp/blines-venv && /tmp/blines-venv/bin/pip install "jax[cpu]==0.4.30" flax==0.8.5 \\
        optax==0.2.3 tensorflow-probability==0.24.0 evosax==0.1.6 gymnax==0.0.8 chex==0.1.86 "numpy<2" \\
        "pandas<2.3" ml-dtypes==0.4.1 "scipy<1.15" dotmap tqdm pyyaml matplotlib
    python benchmarks/source_runs.py --rows mountaincar --blines-python /tmp/blines-venv/bin/python \\
        --blines-git PATH/gymnax-blines.git

CleanRL (``--cleanrl-python``; ``--cleanrl-git``, a git directory of vwxyzjn/cleanrl), in the gymnasium and
MuJoCo its ``pyproject.toml`` pins (``gymnasium==0.29.1``, ``mujoco<=2.3.3``); about 27 minutes a seed on a 2-core
machine's core (626 env steps/s):

    python -m venv /tmp/cleanrl-venv && /tmp/cleanrl-venv/bin/pip install torch gymnasium==0.29.1 mujoco==2.3.3 \\
        "numpy<2" tyro tensorboard
    python benchmarks/source_runs.py --rows pusher --cleanrl-python /tmp/cleanrl-venv/bin/python \\
        --cleanrl-git PATH/cleanrl.git

(TFP 0.24's JAX substrate calls ``np.issctype``, which NumPy 2 removed: without ``numpy<2`` the Gaussian rows fail.)

The saved figures appear in ``reproduce.md`` beside the rows they belong to (``reproduce.py --render``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).parent))
import _report  # noqa: E402
import reproduce  # noqa: E402

ZOO_COMMIT = "22e3ff2"  # the commit reproduce.ZOO quotes
BLINES_COMMIT = "3f029d6"  # the commit reproduce.BLINES quotes
CLEANRL_COMMIT = "fe8d8a0"  # the commit reproduce.CLEANRL quotes
EVAL_STEPS = 150_000  # rl_zoo3/benchmark.py's -n
EVAL_SEED = 0  # rl_zoo3/benchmark.py's --seed


class ZooRow(NamedTuple):
    algo: str  # the zoo's --algo
    env_id: str  # the zoo's --env (gymnasium's id)


ZOO_ROWS = {
    "mountaincar-zoo": ZooRow("ppo", "MountainCar-v0"),
    "mountaincar-a2c": ZooRow("a2c", "MountainCar-v0"),
    "mountaincar-dqn": ZooRow("dqn", "MountainCar-v0"),
    "cartpole-dqn-zoo": ZooRow("dqn", "CartPole-v1"),
    "acrobot-dqn": ZooRow("dqn", "Acrobot-v1"),
    "acrobot-a2c": ZooRow("a2c", "Acrobot-v1"),
}


class BlinesRow(NamedTuple):
    env_name: str  # gymnax's name, agents/<env_name>/ppo.yaml


BLINES_ROWS = {
    "mountaincar": BlinesRow("MountainCar-v0"),
    "pendulum": BlinesRow("Pendulum-v1"),
    "mountaincar-continuous": BlinesRow("MountainCarContinuous-v0"),
}
# the files of gymnax-blines its PPO needs (the repository's GIFs and checkpoints are not)
BLINES_FILES = ("train.py", "utils", *(f"agents/{r.env_name}/ppo.yaml" for r in BLINES_ROWS.values()))
# run in gymnax-blines' Python from its folder: plays the checkpoint ARGV[1] as utils/ppo.py's evaluation does
BLINES_PLAY = """
import pickle, sys
import jax, optax
from flax.training.train_state import TrainState
from utils.models import get_model_ready
from utils.ppo import RolloutManager
with open(sys.argv[1], "rb") as f:
    data = pickle.load(f)
config = data["train_config"]
model, _ = get_model_ready(jax.random.PRNGKey(0), config)
state = TrainState.create(apply_fn=model.apply, params=data["network"], tx=optax.sgd(0.0))
rollouts = RolloutManager(model, config.env_name, config.env_kwargs, config.env_params)
score = rollouts.batch_evaluate(jax.random.PRNGKey(int(sys.argv[2])), state, config.num_test_rollouts)
print(float(score), config.num_test_rollouts, data["log_steps"][-1], float(data["log_return"][-1]))
"""


class CleanrlRow(NamedTuple):
    env_id: str  # ppo_continuous_action.py's --env-id (gymnasium's id)


CLEANRL_ROWS = {
    "inverted-pendulum-mujoco": CleanrlRow("InvertedPendulum-v4"),
    "halfcheetah": CleanrlRow("HalfCheetah-v4"),
    "hopper": CleanrlRow("Hopper-v4"),
    "pusher": CleanrlRow("Pusher-v4"),
}
CLEANRL_SCRIPT = "cleanrl/ppo_continuous_action.py"
CLEANRL_LAST = 100  # CleanRL's figure: the training return of the last 100 episodes
# ppo_continuous_action.py prints each finished episode's return as a one-element array: "episodic_return=[963.]"
CLEANRL_EPISODE = re.compile(r"episodic_return=\[\s*([^\]\s]+)\s*\]")


def checkout(git_dir: str, commit: str, into: Path, flag: str, paths: tuple[str, ...] = ()) -> str:
    """A copy of ``git_dir``'s tree at ``commit`` in ``into`` (only ``paths``, if given); the full commit hash, or a
    one-line exit naming ``flag`` (the option that gave ``git_dir``) if it lacks the commit."""
    found = subprocess.run(
        ["git", f"--git-dir={git_dir}", "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if found.returncode:
        raise SystemExit(f"{flag}: {git_dir} has no commit {commit}")
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", commit, *paths], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return found.stdout.strip()


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """``command``'s standard output; a one-line exit naming it and its error's last line if it fails. ``env``: the
    variables set for it beside this process's."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise SystemExit(f"source_runs.py: {' '.join(command[1:3])} ... failed in {cwd}: {last}")
    return done.stdout


def monitor_returns(folder: Path) -> list[float]:
    """The episode returns of the Stable-Baselines3 ``Monitor`` files in ``folder`` (``r`` column)."""
    returns = []
    for path in sorted(folder.glob("*.monitor.csv")):
        with open(path) as f:
            next(f)  # the "#{...}" line of the monitor's metadata
            returns += [float(line["r"]) for line in csv.DictReader(f)]
    return returns


def zoo_seed(python: str, zoo: Path, row: ZooRow, seed: int, work: Path, args: argparse.Namespace) -> dict:
    """One seed of a zoo row: train with ``train.py`` (no evaluation during training), then ``enjoy.py`` as the
    zoo's benchmark plays it; the evaluation's episode returns and both phases' seconds."""
    logs, rewards = work / f"{row.algo}-{row.env_id}-{seed}", work / f"eval-{row.algo}-{row.env_id}-{seed}"
    common = ["--algo", row.algo, "--env", row.env_id, "-f", str(logs), "--num-threads", "1"]
    start = time.perf_counter()
    train = [python, "train.py", *common, "--seed", str(seed), "--eval-freq", "-1", "--vec-env", "dummy"]
    run(train, zoo)
    trained = time.perf_counter()
    play = [python, "enjoy.py", *common, "--exp-id", "1", "-n", str(args.eval_steps), "--n-envs", "1", "--no-render"]
    play += ["--seed", str(EVAL_SEED), "--verbose", "0", "--reward-log", str(rewards)]
    run(play, zoo)
    returns = monitor_returns(rewards)
    return {
        "seed": seed,
        "return": sum(returns) / len(returns),
        "episodes": len(returns),
        "train_s": trained - start,
        "eval_s": time.perf_counter() - trained,
    }


def blines_seed(python: str, source: Path, row: BlinesRow, seed: int, work: Path, args: argparse.Namespace) -> dict:
    """One seed of a gymnax-blines row: ``exec.sh``'s training command in a copy of the source of its own (the
    checkpoint's path is fixed), then the checkpoint played by the source's evaluation; its return, the source's
    own last logged evaluation, and the seconds."""
    folder = work / f"blines-{row.env_name}-{seed}"
    shutil.copytree(source, folder)
    start = time.perf_counter()
    train = [python, "train.py", "-config", f"agents/{row.env_name}/ppo.yaml", "-seed", str(seed)]
    run(train, folder)
    trained = time.perf_counter()
    play = [python, "-c", BLINES_PLAY, f"agents/{row.env_name}/ppo.pkl", str(EVAL_SEED)]
    score, episodes, logged_steps, logged = run(play, folder).split()[-4:]
    return {
        "seed": seed,
        "return": float(score),
        "episodes": int(episodes),
        "last_logged": {"env_steps": int(logged_steps), "return": float(logged)},
        "train_s": trained - start,
        "eval_s": time.perf_counter() - trained,
    }


def cleanrl_seed(python: str, source: Path, row: CleanrlRow, seed: int, work: Path, args: argparse.Namespace) -> dict:
    """One seed of a CleanRL row: ``ppo_continuous_action.py`` with its defaults (1M env steps) on the CPU, one
    thread as CleanRL's ``benchmark/ppo.sh`` runs it (``OMP_NUM_THREADS=1``), scored as CleanRL scores its figure:
    the mean training return of the last 100 episodes it prints."""
    folder = work / f"cleanrl-{row.env_id}-{seed}"  # the script writes its TensorBoard log into runs/ here
    folder.mkdir()
    start = time.perf_counter()
    command = [python, str(source / CLEANRL_SCRIPT), "--env-id", row.env_id, "--seed", str(seed), "--no-cuda"]
    printed = run(command, folder, env={"OMP_NUM_THREADS": "1"})
    returns = [float(r) for r in CLEANRL_EPISODE.findall(printed)]
    if not returns:
        raise SystemExit(f"source_runs.py: {CLEANRL_SCRIPT} --env-id {row.env_id} printed no episode return")
    last = returns[-CLEANRL_LAST:]
    return {
        "seed": seed,
        "return": sum(last) / len(last),
        "episodes": len(last),
        "episodes_in_run": len(returns),
        "train_s": time.perf_counter() - start,
        "eval_s": 0.0,
    }


def versions(python: str, names: tuple[str, ...]) -> str:
    """``name version, ...`` of the distributions ``names`` installed in ``python``."""
    code = f"from importlib.metadata import version; print(*(version(n) for n in {names}))"
    found = run([python, "-c", code], Path.cwd()).split()
    return ", ".join(f"{name} {version}" for name, version in zip(names, found, strict=True))


class Source(NamedTuple):
    """A source whose own code runs here: its flags (``--NAME-python``, ``--NAME-git``), rows, and how it runs."""

    name: str
    rows: dict  # the reproduction rows it runs, by key
    commit: str  # the commit the reproduction table quotes
    files: tuple[str, ...]  # the paths of the checkout it needs (all of it: ())
    packages: tuple[str, ...]  # what a run records of its Python
    seed: Callable[..., dict]  # one seed: (python, checkout, row, seed, work, args) -> its result
    method: Callable[[argparse.Namespace, str], str]  # (args, the commit checked out) -> how it ran, in words


SOURCES = (
    Source(
        "zoo",
        ZOO_ROWS,
        ZOO_COMMIT,
        (),
        ("stable-baselines3", "torch", "gymnasium"),
        zoo_seed,
        lambda args, commit: (
            f"rl-baselines3-zoo at {commit[:7]}, train.py then enjoy.py as rl_zoo3/benchmark.py plays "
            f"({args.eval_steps:,} env steps, deterministic, the final model)"
        ),
    ),
    Source(
        "blines",
        BLINES_ROWS,
        BLINES_COMMIT,
        BLINES_FILES,
        ("jax", "flax", "gymnax", "evosax"),
        blines_seed,
        lambda args, commit: (
            f"gymnax-blines at {commit[:7]}, exec.sh's train.py -config agents/ENV/ppo.yaml -seed S (constant "
            f"learning rate 5e-4, train.py's -lr default), the checkpoint played by utils/ppo.py's batch_evaluate "
            f"(164 episodes, sampled)"
        ),
    ),
    Source(
        "cleanrl",
        CLEANRL_ROWS,
        CLEANRL_COMMIT,
        (CLEANRL_SCRIPT,),
        ("torch", "gymnasium", "mujoco"),
        cleanrl_seed,
        lambda args, commit: (
            f"CleanRL at {commit[:7]}, {CLEANRL_SCRIPT} with its defaults (1M env steps, one thread), the mean "
            f"training return of its last {CLEANRL_LAST} episodes"
        ),
    ),
)


def summarize(key: str, runs: list[dict], saved: dict, source: str) -> dict:
    """A row's source runs: the IQM of the seeds' returns, its interval, normalised as the table normalises."""
    from podracer.core import stats

    runs = sorted(runs, key=lambda r: r["seed"])
    returns = [r["return"] for r in runs]
    iqm = stats.interquartile_mean(returns)
    low, high, spread = stats.spread(returns, stats.interquartile_mean)  # under 5 seeds, their range
    row = saved.get(key)
    # podracer's row against the source's code on the same seeds (the row may have run more): the IQMs' difference
    # and its interval (none under 5 seeds a side, where a bootstrap means little)
    ours = on_seeds(row, [r["seed"] for r in runs]) if row else None
    podracer_iqm = stats.interquartile_mean(ours) if ours else row["iqm"] if row else None
    difference = (
        (podracer_iqm - iqm, *stats.difference_interval(ours, returns, stats.interquartile_mean))
        if ours and min(len(ours), len(returns)) >= stats.INTERVAL_SEEDS
        else None
    )
    return {
        "key": key,
        "source": source,
        "iqm": iqm,
        "ci_low": low,
        "ci_high": high,
        "spread": spread,
        "returns": returns,
        "seeds": [r["seed"] for r in runs],
        "published": row["published"] if row else None,
        "normalised": reproduce.normalized(iqm, row["random"], row["published"]) if row else None,
        "podracer_iqm": podracer_iqm,
        "podracer_normalised": reproduce.normalized(podracer_iqm, row["random"], row["published"]) if row else None,
        "difference": difference,
        "runs": runs,
    }


def on_seeds(row: dict, seeds: list[int]) -> list[float] | None:
    """The saved row's returns on ``seeds`` (its ``per_seed`` run from its ``seed``), in that order; None when the
    row kept no returns or did not run every one of them."""
    returns = row.get("per_seed")
    if not returns:
        return None
    first = row.get("seed", reproduce.REPORT_SEED)
    by_seed = {first + i: value for i, value in enumerate(returns)}
    return [by_seed[seed] for seed in seeds] if all(seed in by_seed for seed in seeds) else None


def shown_difference(difference: list[float] | None) -> str:
    """``+1.2 [-3.4, 5.6]``: a difference and its interval, ``-`` where there is none."""
    if difference is None:
        return "-"
    value, low, high = difference
    return f"{value:+.1f} [{low:+.1f}, {high:+.1f}]"


def table(results: list[dict]) -> str:
    """The rows' Markdown: the source's code here beside podracer's row, both normalised, then what ran."""
    lines = [
        "| row | published | the source's code here: IQM [95% CI; range under 5 seeds] | per seed | normalised | "
        "podracer's row | "
        "normalised | podracer's minus the source's [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        per_seed = ", ".join(f"{v:.1f}" for v in r["returns"])
        norm = "-" if r["normalised"] is None else reproduce.shown(r["normalised"])
        ours = "-" if r["podracer_normalised"] is None else reproduce.shown(r["podracer_normalised"])
        seeds = "" if r.get("spread", "95% CI") == "95% CI" else f" (range, {len(r['returns'])} seeds)"
        lines.append(
            f"| {r['key']} | {r['published']} | {r['iqm']:.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]{seeds} | "
            f"{per_seed} | {norm} | {r['podracer_iqm']:.1f} | {ours} | {shown_difference(r.get('difference'))} |"
        )
    notes = [f"- {r['key']}: {r['source']}" for r in results]
    rule = (
        "Normalised as the reproduction table normalises: (IQM - random) / (published - random), random play and the "
        "published figure the row's (`reproduce.json`); podracer's row is the table's, its IQM over the seeds the "
        "source's code ran (where the row ran more). The last "
        "column is podracer's IQM minus the source's, with the percentile bootstrap interval of that difference (each "
        "side's seeds resampled on their own): an interval that holds 0 says that, at these seeds, the two cannot be "
        "told apart."
    )
    return "\n".join(lines) + f"\n\n{rule}\n\nWhat ran:\n\n" + "\n".join(notes) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    rows = [key for source in SOURCES for key in source.rows]
    parser.add_argument(
        "--rows", default="mountaincar-zoo,mountaincar-a2c,mountaincar-dqn,mountaincar", help=f"of {', '.join(rows)}"
    )
    parser.add_argument("--zoo-python", help="a Python with Stable-Baselines3 and the zoo's requirements")
    parser.add_argument("--zoo-git", help="a git directory of DLR-RM/rl-baselines3-zoo")
    parser.add_argument("--blines-python", help="a Python with gymnax-blines' requirements")
    parser.add_argument("--blines-git", help="a git directory of RobertTLange/gymnax-blines")
    parser.add_argument("--cleanrl-python", help="a Python with CleanRL's MuJoCo requirements")
    parser.add_argument("--cleanrl-git", help="a git directory of vwxyzjn/cleanrl")
    parser.add_argument("--seed", type=int, default=reproduce.REPORT_SEED, help="the first seed")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per row")
    parser.add_argument("--eval-steps", type=int, default=EVAL_STEPS, help="env steps of each zoo agent's evaluation")
    parser.add_argument("--jobs", type=int, default=2, help="seeds trained at once (one core each)")
    _report.add_output_flags(parser, "source_runs")
    parser.add_argument(
        "--render",
        action="store_true",
        help="rewrite the saved table (--out, else benchmarks/results) beside today's reproduce.json; run nothing",
    )
    args = parser.parse_args(argv)
    saved_path = _report.RESULTS / "reproduce.json"
    saved = {r["key"]: r for r in json.loads(saved_path.read_text())} if saved_path.exists() else {}
    if args.render:
        out = _report.output_path(True, args.out, "source_runs")
        results = [
            summarize(r["key"], r["runs"], saved, r["source"]) for r in json.loads(out.with_suffix(".json").read_text())
        ]
        _report.save(out, table(results), results)
        return 0
    keys = [k for k in args.rows.split(",") if k]
    unknown = [k for k in keys if k not in rows]
    if unknown:
        parser.error(f"--rows: no source run for {', '.join(unknown)} (rows: {', '.join(rows)})")
    for source in SOURCES:
        wanted = [k for k in keys if k in source.rows]
        for part in ("python", "git"):
            if wanted and not getattr(args, f"{source.name}_{part}"):
                parser.error(f"--{source.name}-{part} is needed for --rows {','.join(wanted)}")
    cpu = _report.cpu_model()
    with tempfile.TemporaryDirectory() as tmp:
        work, sources, jobs = Path(tmp), {}, []
        seeds = range(args.seed, args.seed + args.seeds)
        for source in SOURCES:
            wanted = [k for k in keys if k in source.rows]
            if not wanted:
                continue
            python, folder = getattr(args, f"{source.name}_python"), work / source.name
            folder.mkdir()
            git_dir = getattr(args, f"{source.name}_git")
            commit = checkout(git_dir, source.commit, folder, f"--{source.name}-git", source.files)
            said = f"{source.method(args, commit)}; {versions(python, source.packages)}"
            for key in wanted:
                sources[key] = f"{said}; seeds {seeds[0]}-{seeds[-1]}, {cpu}"
                jobs += [(key, source.seed, (python, folder, source.rows[key], s, work, args)) for s in seeds]
        runs: dict[str, list[dict]] = {key: [] for key in keys}
        out = _report.output_path(args.save, args.out, "source_runs")
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {pool.submit(fn, *fn_args): key for key, fn, fn_args in jobs}
            for future in concurrent.futures.as_completed(futures):
                done = future.result()
                runs[futures[future]].append(done)
                print(
                    f"{futures[future]} seed {done['seed']}: {done['return']:.1f} over {done['episodes']} episodes "
                    f"(train {done['train_s']:.0f} s, evaluation {done['eval_s']:.0f} s)",
                    flush=True,
                )
                if out is not None:  # after every seed: a run stopped early keeps the seeds it finished
                    write(out, [summarize(k, runs[k], saved, sources[k]) for k in keys if runs[k]])
    results = [summarize(key, runs[key], saved, sources[key]) for key in keys]
    print(table(results))
    return 0


def write(out: Path, results: list[dict]) -> None:
    """``results`` saved to ``out`` (``.md`` and ``.json``) in place of the rows of the same keys there."""
    previous = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else []
    keys = {r["key"] for r in results}
    merged = [r for r in previous if r["key"] not in keys] + results
    merged.sort(key=lambda r: [row.key for row in reproduce.ROWS].index(r["key"]))
    _report.save(out, table(merged), merged)


if __name__ == "__main__":
    sys.exit(main())
