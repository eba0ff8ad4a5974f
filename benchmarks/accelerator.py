"""Every headline figure on an accelerator, from one prepared command, within a time budget.

A lent accelerator comes for minutes, with no package index, so this script is ready before one is: it runs a
prioritised list of measurements (rows) on whatever accelerator JAX sees, each in a process of its own with the
time the budget has left, writes every result the moment it has it (a run cut at its limit still returns what
finished), and prints one table naming the device, the JAX version and the commit. A row starts only when what is
left of the budget covers what it takes (``Row.takes_s``, measured on an H200), and each says the minutes it took.
Rows, in priority order:

- ``pong-training``: ``podracer sebulba --preset pong`` (PPO at CleanRL's envpool settings, the preset's GPU-box
  layout) until its training return first reaches 18 or the row's share of the budget is spent
  (:data:`PONG_SHARE`): the wall-clock and env steps at which it reached 18, and the curve. Stopped, the run
  checkpoints, and the next call resumes it where it is carried (``pong_run.tar.gz``).
- ``anakin``: PPO on gymnax's CartPole-v1 at 16,384 and 65,536 environments, float32 and ``--compute-dtype
  bfloat16``, beside PureJaxRL's ``ppo.py`` at its own settings with the same environments, rollout and batch (each
  side compiled ahead of time, rounds alternating, median of per-round ratios), with each side's training return
  after one call from scratch (2^25 env steps).
- ``sebulba-pong``: Sebulba IMPALA on Pong (``benchmarks/sebulba_throughput.py``, 2 actor threads x 128 envs: the
  best layout measured on an H100): envpool's own ceiling and the end-to-end env steps/s (goal: 80 % of the
  ceiling); then MuZero's actor throughput the same way.
- ``minatar-ppo``: PPO on MinAtar Breakout, SpaceInvaders, Asterix and Freeway at gymnax-blines' settings (the
  ``*-minatar`` presets), 10M env steps x 10 seeds (100-109) vmapped: wall-clock and the seeds' returns; PureJaxRL's
  ``ppo.py`` on Breakout at the same batch settings and seeds beside it.
- ``minatar-pqn``: PQN on the same games at purejaxql's settings and 10M budget (the ``*-minatar-pqn`` presets).
- ``craftax``: Anakin PPO env steps/s on Craftax-Classic-Symbolic, beside the Craftax paper's "a run of PPO using 1
  billion environment interactions finishes in under an hour using only a single GPU" (arXiv 2402.16801, abstract;
  an RTX 4090 by the project's page): a quoted bound, 278k env steps/s, not a run.
- ``fixed-cost``: ``benchmarks/fixed_cost.py`` at MinAtar's sizes (PPO's policy on Breakout, 640 and 1,280 envs):
  the kernels and the fixed microseconds of one rollout step, with the rollout loop unrolled 1, 2, 4 and 8 times.
- ``anakin-sizes``: Anakin PPO and A2C env steps/s on Catch and CartPole at 4,096 to 65,536 environments (one
  device, compilation apart).

On a lent machine (Python 3.12, JAX with CUDA, no rlax, mctx, gymnax, envpool, ...), carry the folder that
``benchmarks/wheelhouse.py`` prepares here and install from it first (``--wheelhouse``)::

    python3 benchmarks/accelerator.py --wheelhouse .accelerator --out "$OUT"         # everything, 540 s
    python3 benchmarks/accelerator.py --wheelhouse .accelerator --rows minatar-pqn --budget-s 500 --out "$OUT"
    python benchmarks/accelerator.py --smoke                          # every row at toy sizes, on the CPU
    python benchmarks/accelerator.py --table DIR/accelerator.jsonl --save   # the table into benchmarks/results/

``--games`` orders (or narrows) the MinAtar rows' games, Asterix first by default. ``--out DIR`` receives three
files, rewritten as rows finish: ``accelerator.jsonl`` (one record per result), ``accelerator.md`` (the table) and
``accelerator.log`` (every row's output). ``--smoke`` runs every row at toy sizes on the CPU in about a minute (the
slow tier of the tests runs it, so the script works when a device comes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAME = "accelerator"
DEFAULT_BUDGET_S = 540  # one 10-minute call, less the machine's start-up, the install and the transfers
PUREJAXRL_COMMIT = "31756b19"  # luchris429/purejaxrl: purejaxrl/ppo.py and wrappers.py, as the CPU benchmarks
# Asterix first: the one game whose 3-seed CPU row falls short of its figure (a call too short for four keeps it)
MINATAR_GAMES = ("asterix", "breakout", "space-invaders", "freeway")
SEEDS = tuple(range(100, 110))  # the reproduction table's held-out seeds, ten a game
# Sebulba's layouts on a 16-core GPU box, the best of the grid measured on an H100 (docs/benchmarks.md, 2026-11-22):
# for throughput, 2 actor threads x 128 envs, 8 envpool threads (74.5 % of the ceiling); for learning, the layout of
# that page's Pong curve (15.2k env steps/s). The flagship command's defaults (one thread of 32 envs) would take about
# an hour for 10M env steps.
PONG_THROUGHPUT_LAYOUT = ("--actor-threads", "2", "--num-envs-per-actor", "128", "--envpool-threads", "8")
PONG_SHARE = 0.45  # of the budget, the most pong-training spends in one call: the later rows keep the rest
PONG_TARGET = 18.0  # the training return the row times
# --smoke's Pong network: the Nature CNN's compilation and CPU gradients would take minutes of a smoke run
SMOKE_TORSO = ("--torso", "mlp", "--hidden-sizes", "32")
CRAFTAX_PAPER_SPS = 1e9 / 3600  # PPO, "1 billion environment interactions ... in under an hour" (arXiv 2402.16801)


@dataclass(frozen=True)
class Row:
    name: str
    needs: tuple[str, ...]  # modules the row cannot run without
    # what the row takes in full on an H200 (its start-up and compilation included): it starts only when this much of
    # the budget is left (pong-training: the least worth a start; it stops at its share)
    takes_s: float
    about: str


ROWS = (
    Row("pong-training", ("envpool",), 120, "podracer sebulba --preset pong: time and env steps to a return of 18"),
    Row("anakin", (), 150, "Anakin PPO, float32 and bfloat16, beside PureJaxRL's ppo.py on CartPole"),
    Row(
        "sebulba-pong",
        ("envpool",),
        150,
        "Sebulba IMPALA on Pong against envpool's ceiling, with and without --envpool-xla; the actor's envpool loop "
        "in four forms; MuZero's actors",
    ),
    Row("minatar-ppo", ("gymnax",), 150, "PPO on MinAtar at gymnax-blines' settings, 10M x 10 seeds, a game"),
    Row("minatar-pqn", ("gymnax",), 150, "PQN on MinAtar at purejaxql's settings, 10M x 10 seeds, a game"),
    Row("craftax", ("craftax",), 60, "Anakin PPO env steps/s on Craftax-Classic-Symbolic"),
    Row("fixed-cost", ("gymnax",), 90, "a rollout step's fixed cost at MinAtar's sizes, --rollout-unroll 1 to 8"),
    Row("anakin-sizes", (), 60, "Anakin PPO and A2C env steps/s on Catch and CartPole, 4k to 64k envs"),
)
BY_NAME = {row.name: row for row in ROWS}


# ---------------------------------------------------------------------------------------------------- the driver


def commit(carried: Path | None = None) -> str:
    """The commit the rows run: what ``benchmarks/wheelhouse.py`` wrote into ``carried`` (``--wheelhouse``'s
    folder) where there is one, since a lent machine's copy of the checkout may hold a ``.git`` of another commit
    (on 2026-11-30 it named the session's first commit, ``+dirty``, beside the working tree of a later one); else
    the checkout's (``+dirty`` when it has changes)."""
    if carried is not None and (carried / "COMMIT").is_file():
        return (carried / "COMMIT").read_text().strip() + " (the carried folder's)"
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True
        )
        if head.returncode == 0:
            dirty = subprocess.run(
                ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            return head.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        pass
    fallback = ROOT / ".accelerator" / "COMMIT"  # a copy with no .git, run without --wheelhouse
    if fallback.is_file():
        return fallback.read_text().strip() + " (from the carried folder)"
    return "unknown"


def install_wheelhouse(folder: Path) -> str:
    """Installs ``folder/wheels/*.whl`` offline into a folder of their own and puts it (and the checkout) on this
    process's path and its children's ``PYTHONPATH``; returns that folder."""
    wheels = sorted((folder / "wheels").glob("*.whl"))
    if not wheels:
        raise SystemExit(f"--wheelhouse {folder}: no wheels in {folder / 'wheels'} (python benchmarks/wheelhouse.py).")
    site = tempfile.mkdtemp(prefix="podracer-site-")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--target",
            site,
            *map(str, wheels),
        ],
        check=True,
    )
    print(f"installed {len(wheels)} carried wheels into {site}", flush=True)
    return site


def child_env(site: str | None, smoke: bool) -> dict:
    paths = [str(ROOT), str(HERE)] + ([site] if site else [])
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if smoke:
        env["JAX_PLATFORMS"] = "cpu"
    return env


def describe_device(env: dict) -> dict:
    """The device as JAX sees it, asked in a process of its own (this one never starts a backend: on a GPU that
    would hold memory the rows need)."""
    code = (
        "import json, jax; d = jax.devices(); "
        "print(json.dumps({'kind': d[0].device_kind, 'count': len(d), 'platform': d[0].platform, "
        "'jax': jax.__version__}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    if out.returncode:
        raise SystemExit(f"JAX did not start: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def missing(row: Row, env: dict) -> list[str]:
    code = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))"
    out = subprocess.run([sys.executable, "-c", code, *row.needs], capture_output=True, text=True, env=env)
    return out.stdout.split()


def read_records(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _number(value, unit: str) -> str:
    if value is None:
        return "–"
    if unit == "s":
        return f"{value:,.1f} s"
    if unit == "%":
        return f"{value:.1f} %"
    if unit == "min":
        return f"{value:.1f} min"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def table(header: dict, records: list[dict]) -> str:
    lines = [
        f"Accelerator suite on {header['device']}, JAX {header['jax']}, podracer {header['commit']}, "
        f"{header['date']}{' (smoke: toy sizes on the CPU)' if header.get('smoke') else ''}",
        "",
        "| row | measurement | podracer | peer | podracer / peer | notes |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in records:
        if r.get("header"):
            continue
        peer = _number(r.get("peer"), r.get("unit", "")) + (f" ({r['peer_name']})" if r.get("peer_name") else "")
        ratio = f"{r['ratio']:.2f}x" if r.get("ratio") is not None else "–"
        unit = r.get("unit", "")
        what = r["what"] + (f" [{unit}]" if unit and unit not in ("s", "%", "min") else "")
        lines.append(
            f"| {r['row']} | {what} | {_number(r.get('podracer'), unit)} | "
            f"{peer if r.get('peer') is not None else '–'} | {ratio} | {r.get('note', '')} |"
        )
    return "\n".join(lines) + "\n"


def drive(args, out: Path) -> int:
    site = install_wheelhouse(Path(args.wheelhouse)) if args.wheelhouse else None
    env = child_env(site, args.smoke)
    started = time.monotonic()
    deadline = started + args.budget_s
    device = describe_device(env)
    header = {
        "header": True,
        "device": f"{device['kind']} x{device['count']} [{device['platform']}]",
        "jax": device["jax"],
        "commit": commit(Path(args.wheelhouse) if args.wheelhouse else None),
        "date": datetime.date.today().isoformat(),
        "smoke": args.smoke,
        "budget_s": args.budget_s,
    }
    out.mkdir(parents=True, exist_ok=True)
    results, log_path = out / f"{NAME}.jsonl", out / f"{NAME}.log"
    results.write_text(json.dumps(header) + "\n")
    print(f"# {table(header, []).splitlines()[0]}; budget {args.budget_s:.0f} s", flush=True)
    rows = [BY_NAME[name] for name in args.rows] if args.rows else list(ROWS)
    failed = 0
    with log_path.open("w") as log:
        for row in rows:
            left = deadline - time.monotonic()
            absent = missing(row, env)
            if absent:
                note = f"not run: needs {', '.join(absent)} (carry them: python benchmarks/wheelhouse.py)"
            elif left < (10 if args.smoke else row.takes_s):
                note = f"not run: {left:.0f} s of the budget left, the row takes about {row.takes_s:.0f} s"
            else:
                note = None
            if note:
                _append(results, {"row": row.name, "what": row.about, "note": note})
                print(f"{row.name}: {note}", flush=True)
                continue
            print(f"== {row.name}: {row.about} ({left:.0f} s left)", flush=True)
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--worker",
                row.name,
                "--results",
                str(results),
                "--deadline",
                str(time.time() + left - 5),
            ]
            command += ["--smoke"] if args.smoke else []
            command += ["--carried", args.carried] + (["--purejaxrl", args.purejaxrl] if args.purejaxrl else [])
            command += ["--games", ",".join(args.games), "--budget-s", str(args.budget_s)]
            began = time.monotonic()
            status = _run_row(command, env, left, log)
            took = time.monotonic() - began
            print(f"{row.name}: {took:.0f} s", flush=True)
            _append(results, {"row": row.name, "what": "the row's wall-clock", "podracer": took / 60, "unit": "min"})
            if status != 0:
                failed += 1
                what = "cut at the budget" if status is None else f"failed (exit {status}); see {log_path.name}"
                _append(results, {"row": row.name, "what": row.about, "note": what})
                print(f"{row.name}: {what}", flush=True)
            (out / f"{NAME}.md").write_text(table(header, read_records(results)))
    text = table(header, read_records(results))
    (out / f"{NAME}.md").write_text(text)
    print("\n" + text, flush=True)
    print(f"wrote {results}, {out / f'{NAME}.md'} and {log_path} in {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failed and args.smoke else 0


def _append(path: Path, record: dict) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def _run_row(command, env, seconds: float, log) -> int | None:
    """The row's exit status, or ``None`` when the budget cut it (SIGTERM first: a training run checkpoints)."""
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    end = time.monotonic() + seconds
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    cut = False
    while True:
        if not cut and time.monotonic() > end:
            cut = True
            os.killpg(proc.pid, signal.SIGTERM)
            end = time.monotonic() + 30
        elif cut and time.monotonic() > end:
            os.killpg(proc.pid, signal.SIGKILL)
        if selector.select(timeout=1.0):
            line = proc.stdout.readline()
            if not line:
                break
            print(f"  {line}", end="", flush=True)
            log.write(line)
            log.flush()
    proc.wait()
    return None if cut else proc.returncode


# ---------------------------------------------------------------------------------------------------- the rows


class Context:
    def __init__(
        self,
        row: str,
        results: Path,
        deadline: float,
        smoke: bool,
        carried: str,
        purejaxrl: str | None,
        games: tuple[str, ...] = MINATAR_GAMES,
        budget_s: float = DEFAULT_BUDGET_S,
    ):
        self.row, self.results, self.deadline, self.smoke, self.games = row, results, deadline, smoke, games
        self.budget_s = budget_s
        self.carried = Path(carried)
        self.purejaxrl = purejaxrl or str(self.carried / "purejaxrl")

    def left(self) -> float:
        return self.deadline - time.time()

    def record(self, what: str, podracer=None, unit: str = "env steps/s", **fields) -> None:
        record = {"row": self.row, "what": what, "podracer": podracer, "unit": unit, **fields}
        _append(self.results, record)
        shown = {k: v for k, v in record.items() if k not in ("row", "data")}
        print(f"result: {json.dumps(shown)}", flush=True)

    def has_purejaxrl(self) -> bool:
        return (Path(self.purejaxrl) / "ppo.py").is_file() and (Path(self.purejaxrl) / "wrappers.py").is_file()


def purejaxrl_make_train(folder: str):
    """PureJaxRL's ``make_train`` from its ``ppo.py`` in ``folder``. Its ``wrappers.py`` imports brax and navix at
    the top for wrappers these rows never use (gymnax's environments only): where they are not installed, empty
    stand-ins take those imports (the lent machine carries neither)."""
    import importlib.util

    stand_ins = {
        "brax": {},
        "brax.envs": {},
        "brax.envs.wrappers": {},
        "brax.envs.wrappers.training": {"EpisodeWrapper": object, "AutoResetWrapper": object},
        "navix": {},
    }
    for module, names in stand_ins.items():
        top = module.split(".")[0]
        if top not in sys.modules and importlib.util.find_spec(top) is not None:
            continue  # the real package: wrappers.py imports it
        if module not in sys.modules:
            stand_in = types.ModuleType(module)
            stand_in.__dict__.update(names)
            sys.modules[module] = stand_in
            if "." in module:
                parent, _, child = module.rpartition(".")
                setattr(sys.modules[parent], child, stand_in)
    sys.path.insert(0, folder)
    from importlib import metadata

    import gymnax
    import ppo  # PureJaxRL's purejaxrl/ppo.py, carried

    if int(metadata.version("gymnax").split(".")[0]) >= 1:
        ppo.gymnax = types.SimpleNamespace(make=lambda *a, **k: _joined(*gymnax.make(*a, **k)))
    return ppo.make_train


def _joined(env, params):
    """gymnax 1.x's environment as gymnax 0.0.x's, which PureJaxRL at 31756b1 was written against: ``step`` returns
    ``done`` (terminated or truncated) where 1.x returns the two apart, and its ``info`` leaves out 1.x's
    ``final_observation``, which 0.0.x did not have: ``ppo.py`` returns every step's ``info`` as its metrics, and
    with it MinAtar Breakout at 64 envs x 1,220 updates x 5 seeds asked an H200 for 160 GB (2026-11-30), CartPole
    4 floats more per env step; everything else is the environment's."""
    import jax.numpy as jnp

    class Joined:
        def __getattr__(self, name):
            return getattr(env, name)

        def step(self, key, state, action, params=None):
            obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)
            info = {k: v for k, v in info.items() if k != "final_observation"}
            return obs, state, reward, jnp.logical_or(terminated, truncated), info

    return Joined(), params


def purejaxrl_config(env_name: str, num_envs: int, num_steps: int, updates: int, **overrides) -> dict:
    from ppo_peers import PUREJAXRL_CARTPOLE  # its __main__'s settings at 31756b1, DEBUG off

    config = dict(PUREJAXRL_CARTPOLE, ENV_NAME=env_name, NUM_ENVS=num_envs, NUM_STEPS=num_steps)
    config.update(overrides)
    config["TOTAL_TIMESTEPS"] = updates * num_envs * num_steps
    return config


def _throughput(ctx: Context, env, agent, n: int, rollout: int, updates: int, calls: int) -> tuple[float, float]:
    """``(compile seconds, env steps/s)`` of Anakin's update on one device (``_report.time_anakin``: compiled ahead
    of time, one warm-up call, the median of ``calls`` timed calls; 2 with ``--smoke``)."""
    import jax

    from podracer.core import learner

    import _report

    compile_s, median = _report.time_anakin(
        env,
        agent,
        learner.make_optimizer(3e-4),
        num_envs=n,
        rollout_length=rollout,
        updates_per_call=updates,
        devices=jax.devices()[:1],
        calls=2 if ctx.smoke else calls,
    )
    return compile_s, updates * rollout * n / median


SIZES = {False: (4096, 16384, 65536), True: (16,)}  # environments on one device (--smoke: toy)
PRECISION_SIZES = {False: (16384, 65536), True: (16,)}  # the anakin row's, float32 and bfloat16


def row_anakin(ctx: Context) -> None:
    import jax

    devices = jax.devices()[:1]
    _beside_purejaxrl(ctx, devices, PRECISION_SIZES[ctx.smoke])


def row_anakin_sizes(ctx: Context) -> None:
    """Anakin PPO and A2C env steps/s on one device, compilation apart (a row of its own, after the rows that
    become table figures: a call too short for everything keeps those)."""
    from podracer.core import agents, envs
    from anakin_throughput import AGENT_SETTINGS

    sizes = SIZES[ctx.smoke]
    target = 2**11 if ctx.smoke else 2**26  # env steps per host call
    for agent_name in ("a2c", "ppo"):
        for env_name in ("catch",) if ctx.smoke else ("catch", "cartpole"):
            for n in sizes:
                rollout, hyper = AGENT_SETTINGS[agent_name]
                env = envs.make(env_name)
                agent = agents.make(agent_name, env.spec(), **hyper)
                updates = max(1, target // (rollout * n))
                compile_s, sps = _throughput(ctx, env, agent, n, rollout, updates, calls=3)
                ctx.record(
                    f"{agent_name} {env_name}, {n:,} envs",
                    sps,
                    note=f"compile {compile_s:.1f} s; {updates} updates of {rollout} steps per call",
                )


def _final_return(metrics) -> float:
    """The training return of a call's last update (the mean over its environments' finished episodes)."""
    import numpy as np

    return float(np.asarray(metrics["episode_return"]).reshape(-1)[-1])


def _beside_purejaxrl(ctx: Context, devices, sizes) -> None:
    """PPO on gymnax's CartPole-v1, its networks in float32 and in bfloat16 (``--compute-dtype``), beside PureJaxRL's
    ``ppo.py`` at its settings, the same environments, rollout, epochs and minibatches: each side compiled ahead of
    time, one call from scratch (its training return is the side's), then rounds alternating (the order rotating),
    medians of per-round ratios. Without PureJaxRL's source carried, podracer's two sides alone."""
    import importlib.util

    import jax

    from podracer.core import agents, envs, learner
    from podracer.core.types import RunFacts

    import _report

    if importlib.util.find_spec("gymnax") is None:
        ctx.record("ppo, float32 and bfloat16, beside PureJaxRL's ppo.py", None, note="not run: needs gymnax")
        return
    theirs_too = ctx.has_purejaxrl()
    if not theirs_too:
        ctx.record(
            "ppo beside PureJaxRL's ppo.py",
            None,
            note=f"not run: PureJaxRL's source is not carried ({ctx.purejaxrl}: python benchmarks/wheelhouse.py "
            "--purejaxrl ...)",
        )
    make_train = purejaxrl_make_train(ctx.purejaxrl) if theirs_too else None
    rounds = 1 if ctx.smoke else 3
    env_id = "CartPole-v1"
    for n in sizes:
        rollout = 128
        updates = max(1, (2**11 if ctx.smoke else 2**25) // (rollout * n))
        env = envs.make(f"gymnax:{env_id}")
        sides, returns, compile_s, sps = {}, {}, {}, {}
        for dtype in ("float32", "bfloat16"):
            facts = RunFacts(updates, n, rollout, updates * rollout * n, compute_dtype=dtype)
            agent = agents.make("ppo", env.spec(), run=facts, num_epochs=4, num_minibatches=4)
            warm_up = []  # the call from scratch: the side's training return
            compiled, state, compile_s[dtype] = _report.compile_anakin(
                env,
                agent,
                learner.make_optimizer(2.5e-4),
                num_envs=n,
                rollout_length=rollout,
                updates_per_call=updates,
                devices=devices,
                warm_up=warm_up,
            )
            returns[dtype] = _final_return(warm_up[0])
            sides[dtype] = [compiled, state]
        if theirs_too:
            config = purejaxrl_config(env_id, n, rollout, updates)
            start = time.perf_counter()
            theirs = jax.jit(make_train(config)).lower(jax.random.PRNGKey(0)).compile()
            compile_s["purejaxrl"] = time.perf_counter() - start
            out = jax.block_until_ready(theirs(jax.random.PRNGKey(0)))  # warm-up
            returns["purejaxrl"] = float(out["metrics"]["returned_episode_returns"][-1].mean())
        names = list(sides) + (["purejaxrl"] if theirs_too else [])
        sps = {name: [] for name in names}
        for r in range(rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                start = time.perf_counter()
                if name == "purejaxrl":
                    jax.block_until_ready(theirs(jax.random.PRNGKey(r)))
                else:
                    compiled, state = sides[name]
                    state, metrics = compiled(state)
                    jax.block_until_ready(metrics)
                    sides[name][1] = state
                sps[name].append(updates * rollout * n / (time.perf_counter() - start))
        shown = ", ".join(f"{k} {v:.1f}" for k, v in returns.items())
        for dtype in sides:
            ratios = [a / b for a, b in zip(sps[dtype], sps["purejaxrl"])] if theirs_too else None
            vs_float32 = [a / b for a, b in zip(sps[dtype], sps["float32"])]
            ctx.record(
                f"ppo gymnax {env_id}, {n:,} envs, {dtype}" + (", beside PureJaxRL" if theirs_too else ""),
                statistics.median(sps[dtype]),
                peer=statistics.median(sps["purejaxrl"]) if theirs_too else None,
                peer_name=f"PureJaxRL {PUREJAXRL_COMMIT[:7]}, float32" if theirs_too else None,
                ratio=statistics.median(ratios) if ratios else None,
                note=f"{rounds} rounds alternating, {updates} updates per call; "
                + (f"{statistics.median(vs_float32):.2f}x float32's; " if dtype != "float32" else "")
                + f"training return after one call from scratch: {shown}; compile "
                + ", ".join(f"{k} {v:.1f} s" for k, v in compile_s.items()),
                data={"ratios": ratios, "vs_float32": vs_float32, "returns": returns, "sps": sps},
            )
        del sides
        if theirs_too:
            del theirs


def _train(ctx: Context, preset: str, seeds: tuple[int, ...]) -> dict:
    """A preset trained as ``benchmarks/reproduce.py`` trains its row (``podracer anakin --preset PRESET`` and the
    row's own flags, :func:`row_flags`) with the seeds vmapped; wall-clock and returns, and what
    ``reproduce.py --from-accelerator`` needs to make the row of them."""
    import podracer

    flags = row_flags(preset)
    settings = dict(preset=preset, num_seeds=len(seeds), seed=seeds[0], no_log_dir=True, **flags)
    if ctx.smoke:
        settings.update(num_updates=2, updates_per_call=1, eval_every=2, eval_episodes=2, num_seeds=2)
    start = time.perf_counter()
    trained = podracer.train("anakin", **settings)
    seconds = time.perf_counter() - start
    last = trained.result.history[-1]
    per_seed = last.get("eval_return_per_seed") or last.get("episode_return_per_seed")
    return {
        "preset": preset,
        "flags": {k.replace("_", "-"): v for k, v in flags.items()},
        "seed": settings["seed"],
        "seconds": seconds,
        "compile_s": trained.result.compile_seconds,
        "env_steps": last["env_steps"],
        "per_seed": [float(x) for x in per_seed],
        "kind": f"{trained.config.eval_policy} evaluation" if "eval_return_per_seed" in last else "training return",
        "sps": trained.result.env_steps_per_second,
    }


def row_flags(preset: str) -> dict:
    """The reproduction table's own flags for the row that trains ``preset`` (``reproduce.Row.flags``, e.g.
    gymnax-blines' ``--kernel-init lecun`` on Breakout), as ``podracer.train``'s keywords: the suite trains a row
    exactly as the table does, so that its seeds can stand in the table."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import reproduce

    row = next((row for row in reproduce.ROWS if row.preset == preset), None)
    flags = row.flag_values() if row is not None else {}
    return {name[2:].replace("-", "_"): value for name, value in flags.items()}


def _iqm(values) -> float:
    from podracer.core import stats

    return float(stats.interquartile_mean(values))


def row_minatar(ctx: Context, agent: str) -> None:
    games = ctx.games[:1] if ctx.smoke else ctx.games
    suffix = "-minatar" if agent == "ppo" else "-minatar-pqn"
    took = None
    for game in games:
        if took is not None and ctx.left() < 1.2 * took:
            ctx.record(
                f"{agent} {game}",
                None,
                unit="s",
                note=f"not run: {ctx.left():.0f} s left, the last game took {took:.0f} s",
            )
            continue
        r = _train(ctx, game + suffix, SEEDS)
        took = r["seconds"]
        ctx.record(
            f"{agent.upper()} {game} MinAtar, {r['env_steps']:,.0f} env steps x {len(r['per_seed'])} seeds",
            r["seconds"],
            unit="s",
            note=f"{r['kind']} per seed {', '.join(f'{x:.1f}' for x in r['per_seed'])} (IQM "
            f"{_iqm(r['per_seed']):.1f}); compile {r['compile_s']:.1f} s; {r['sps']:,.0f} env steps/s",
            data=r,
        )
    if agent == "ppo":
        _purejaxrl_minatar(ctx)


def _purejaxrl_minatar(ctx: Context) -> None:
    """PureJaxRL's ppo.py on MinAtar Breakout at the preset's batch settings, the same seeds vmapped."""
    if not ctx.has_purejaxrl():
        ctx.record("PureJaxRL ppo.py on Breakout", None, unit="s", note="not run: PureJaxRL's source is not carried")
        return
    import jax
    import numpy as np

    updates = 2 if ctx.smoke else 1220
    config = purejaxrl_config(
        "Breakout-MinAtar", 64, 128, updates, LR=5e-4, GAMMA=0.999, NUM_MINIBATCHES=8, ACTIVATION="relu"
    )
    make_train = purejaxrl_make_train(ctx.purejaxrl)
    start = time.perf_counter()
    if ctx.smoke:  # one seed, not vmapped: a vmapped batch of orthogonal inits (LAPACK QRs) can deadlock XLA:CPU
        seeds = SEEDS[:1]
        out = jax.tree.map(lambda x: x[None], jax.jit(make_train(config))(jax.random.PRNGKey(seeds[0])))
    else:
        seeds = SEEDS
        keys = jax.numpy.stack([jax.random.PRNGKey(s) for s in seeds])
        out = jax.jit(jax.vmap(make_train(config)))(keys)
    jax.block_until_ready(out)
    seconds = time.perf_counter() - start
    info = out["metrics"]
    done = np.asarray(info["returned_episode"][:, -1])  # the last update's finished episodes, per seed
    returns = np.asarray(info["returned_episode_returns"][:, -1])
    per_seed = [float(returns[i][done[i]].mean()) if done[i].any() else float("nan") for i in range(len(seeds))]
    ctx.record(
        f"PureJaxRL ppo.py Breakout MinAtar, {config['TOTAL_TIMESTEPS']:,} env steps x {len(seeds)} seeds",
        None,
        unit="s",
        peer=seconds,
        peer_name=f"PureJaxRL {PUREJAXRL_COMMIT[:7]}",
        note=f"training return per seed {', '.join(f'{x:.1f}' for x in per_seed)} (its last update's episodes); "
        "its own 2x64 network (relu) where the preset trains 2x256; compile included",
        data={"per_seed": per_seed, "seconds": seconds},
    )


def _sebulba_throughput(ctx: Context, extra: list[str], label: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "sebulba"
        command = [sys.executable, str(HERE / "sebulba_throughput.py"), "--env", "Pong", "--out", str(out), *extra]
        if ctx.smoke:
            command += [
                "--updates",
                "3",
                "--num-envs-per-actor",
                "8",
                "--rollout-length",
                "8",
                "--repeats",
                "2",
                "--ceiling-steps",
                "16",
                *SMOKE_TORSO,
            ]
        else:
            command += ["--updates", "60", *PONG_THROUGHPUT_LAYOUT]
        subprocess.run(command, check=True, timeout=max(60, ctx.left()))
        row = json.loads(out.with_suffix(".json").read_text())["row"]
    ctx.record(
        f"{label}: end to end, {row['num_envs']} envs x {row['actor_threads']} threads",
        row["end_to_end_sps"],
        peer=row["envpool_ceiling_sps"],
        peer_name="envpool alone, random actions",
        ratio=row["of_ceiling"],
        note=f"goal 0.80 of the ceiling; bound {row['bound_sps']:,.0f}; policy lag {row['policy_lag']:.2f}",
        data=row,
    )


def _actor_forms(ctx: Context) -> None:
    """``benchmarks/actor_envpool.py`` on Pong: the actor's envpool loop alone, sync, two groups, envpool's async
    batches and its XLA step, at the Pong throughput layout's batch per actor."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "forms"
        envs, rollouts, rounds = ("8", "1", "1") if ctx.smoke else (PONG_THROUGHPUT_LAYOUT[3], "2", "3")
        command = [sys.executable, str(HERE / "actor_envpool.py"), "--preset", "pong", "--num-envs", envs]
        command += ["--rollouts", rollouts, "--rounds", rounds, "--out", str(out)]
        command += ["--rollout-length", "8"] if ctx.smoke else []
        subprocess.run(command, check=True, timeout=max(60, ctx.left()))
        data = json.loads(out.with_suffix(".json").read_text())
    sync = statistics.median(data["env_steps_per_s"]["sync"])
    for form, rates in data["env_steps_per_s"].items():
        ctx.record(
            f"Pong actor loop alone, {form}, {data['num_envs']} envs",
            statistics.median(rates),
            peer=sync,
            peer_name="sync (one batch, the host loop)",
            ratio=statistics.median(data["ratio_to_sync"][form]) if form != "sync" else 1.0,
            note="PPO's Nature CNN acting, no learner; rollouts of the preset's length",
            data={"form": form, "rates": rates},
        )


def row_sebulba_pong(ctx: Context) -> None:
    _sebulba_throughput(ctx, [], "IMPALA Pong")
    if ctx.left() > 60:
        _sebulba_throughput(ctx, ["--envpool-xla"], "IMPALA Pong --envpool-xla")
    if ctx.left() > 60:
        _actor_forms(ctx)
    if ctx.left() > 60:
        _sebulba_throughput(ctx, ["--agent", "muzero"], "MuZero Pong actors")


def row_craftax(ctx: Context) -> None:

    from podracer.core import agents, envs

    n = 16 if ctx.smoke else 4096
    rollout = 8 if ctx.smoke else 64
    env = envs.make("craftax:Craftax-Classic-Symbolic-v1")
    agent = agents.make("ppo", env.spec(), num_epochs=4, num_minibatches=8, hidden_sizes=(512, 512))
    updates = 1 if ctx.smoke else 8
    compile_s, sps = _throughput(ctx, env, agent, n, rollout, updates, calls=4)
    ctx.record(
        f"ppo Craftax-Classic-Symbolic, {n:,} envs x {rollout} steps",
        sps,
        peer=CRAFTAX_PAPER_SPS,
        peer_name="Craftax paper: 1B in under an hour, one GPU, quoted",
        ratio=sps / CRAFTAX_PAPER_SPS,
        note=f"compile {compile_s:.1f} s; 2x512 MLPs, 4 epochs of 8 minibatches; the paper's figure is its card's, "
        "not run here",
    )


def row_pong_training(ctx: Context) -> None:
    """``podracer sebulba --preset pong`` until its training return first reaches :data:`PONG_TARGET`, it ends, or
    :data:`PONG_SHARE` of the budget is spent (SIGTERM: the run checkpoints); ``benchmarks/pong_curve.py`` drives it
    and reads the curve from its progress lines.

    The run's folder (its newest checkpoint, records and curve) comes back as ``pong_run.tar.gz`` beside the
    results; carried into the next call as ``.accelerator/pong_run.tar.gz``, the row resumes it (``--resume auto``)
    and continues its curve and its clock (the seconds of every call's training)."""
    import pong_curve

    run_dir = Path(tempfile.mkdtemp(prefix="pong-"))
    carried = ctx.carried / PONG_RUN
    if carried.is_file():
        with tarfile.open(carried) as tar:
            tar.extractall(run_dir, filter="data")
        earlier = json.loads((run_dir / pong_curve.CURVE_FILE).read_text())["curve"]
        print(f"resuming the run carried in {carried}: {earlier[-1][0] if earlier else 0:,.0f} env steps", flush=True)
    command = [sys.executable, "-m", "podracer.cli", "sebulba", "--preset", "pong"]
    if ctx.smoke:
        command += ["--total-env-steps", "256", "--num-envs-per-actor", "8", "--rollout-length", "16", *SMOKE_TORSO]
        command += ["--actor-threads", "1", "--envpool-threads", "0", "--num-minibatches", "4"]
    share = max(10.0, min(ctx.left() - 60, PONG_SHARE * ctx.budget_s))
    run = pong_curve.train_curve(
        command,
        run_dir,
        stop_at_return=PONG_TARGET,
        stop_after_s=share,
        echo=lambda line: print(line, flush=True),
    )
    curve, first = run["curve"], run["first"]
    returned = _pack_run(run_dir, ctx.results.parent / PONG_RUN)
    reached = curve[-1][0] if curve else 0.0
    ctx.record(
        f"podracer sebulba --preset pong: env steps to a training return of {PONG_TARGET:g}",
        first["env_steps"] if first else None,
        unit="env steps",
        note=(
            f"reached {first['return']:.2f} at {first['seconds']:,.0f} s of training"
            if first
            else f"not yet: {curve[-1][2]:.2f} at {reached:,.0f} env steps"
            if curve
            else "no episode ended yet"
        )
        + f"; {run['seconds']:.0f} s of training calls{' (resumed)' if carried.is_file() else ''}, exit "
        f"{run['exit']}; goal: 18 within 10 min, then 5; {returned}",
        data={"curve": curve, "columns": ["env_steps", "seconds", "return"], "first": first},
    )
    if first:
        ctx.record(f"podracer sebulba --preset pong: seconds to a training return of {PONG_TARGET:g}", first["seconds"])


def row_fixed_cost(ctx: Context) -> None:
    import fixed_cost

    sizes, unrolls = ((16, 32), (1, 2)) if ctx.smoke else ((640, 1280), (1, 2, 4, 8))
    for r in fixed_cost.measure("gymnax:Breakout-MinAtar", sizes, unrolls, 128, 3 if ctx.smoke else 7):
        ctx.record(
            f"fixed cost of a rollout step, --rollout-unroll {r['unroll']}",
            r["fixed_us_per_step"],
            unit="µs",
            note=f"{r['kernels_per_step']:.1f} kernels per step; {r['ns_per_env_step']:.2f} ns per env step; "
            + ", ".join(f"{v:.1f} µs per step at {n} envs" for n, v in r["us_per_step"].items())
            + f"; compile {r['compile_s'][sizes[0]]:.1f} s",
            data=r,
        )


PONG_RUN = "pong_run.tar.gz"  # the Pong run between calls: its log folder and newest checkpoint
RETURNED_LIMIT = 16 * 2**20  # the largest file a call brings back


def _pack_run(log_dir: Path, path: Path) -> str:
    """The run's folder, its newest checkpoint only, as ``path`` when it fits a returned file; says which."""
    steps = sorted(log_dir.glob("checkpoint/step_*[0-9]"), key=lambda p: int(p.name.split("_")[1]))
    skip = {p.name for p in steps[:-1]} | {p.name + ".json" for p in steps[:-1]}
    with tarfile.open(path, "w:gz") as tar:
        for item in sorted(log_dir.rglob("*")):
            relative = item.relative_to(log_dir)
            if item.is_file() and not ({*relative.parts} & skip) and item.name != ".podracer.lock":
                tar.add(item, arcname=str(relative))
    if path.stat().st_size > RETURNED_LIMIT:
        size = path.stat().st_size / 2**20
        path.unlink()
        return f"the run's folder ({size:.1f} MiB) is over what a call returns: not kept"
    return f"the run's folder returned as {path.name} (carry it as .accelerator/{PONG_RUN} to resume)"


WORKERS = {
    "anakin": row_anakin,
    "minatar-ppo": lambda ctx: row_minatar(ctx, "ppo"),
    "minatar-pqn": lambda ctx: row_minatar(ctx, "pqn"),
    "sebulba-pong": row_sebulba_pong,
    "craftax": row_craftax,
    "fixed-cost": row_fixed_cost,
    "anakin-sizes": row_anakin_sizes,
    "pong-training": row_pong_training,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="seconds for every row together")
    parser.add_argument("--rows", nargs="+", choices=[r.name for r in ROWS], help="run these rows only, in order")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="the folder for the results (default: $OUT)")
    parser.add_argument("--smoke", action="store_true", help="every row at toy sizes on the CPU")
    parser.add_argument("--wheelhouse", help="the folder benchmarks/wheelhouse.py prepared: install it offline first")
    parser.add_argument(
        "--carried",
        help="the carried folder: PureJaxRL's source (purejaxrl/), a Pong run to resume (pong_run.tar.gz); default: "
        "--wheelhouse's folder, else .accelerator",
    )
    parser.add_argument(
        "--purejaxrl", help="the folder with PureJaxRL's ppo.py and wrappers.py (default: CARRIED/purejaxrl)"
    )
    parser.add_argument(
        "--games",
        default=",".join(MINATAR_GAMES),
        help=f"the MinAtar rows' games, comma-separated, in order (default: {','.join(MINATAR_GAMES)})",
    )
    parser.add_argument("--table", help="an accelerator.jsonl: print its table (with --save, into benchmarks/results/)")
    parser.add_argument("--save", action="store_true", help="with --table: write benchmarks/results/accelerator_*.md")
    parser.add_argument("--list", action="store_true", help="list the rows and exit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--results", help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.budget_s <= 0:
        parser.error(f"--budget-s must be > 0, got {args.budget_s:g}.")
    args.games = tuple(g for g in args.games.split(",") if g)
    unknown = [g for g in args.games if g not in MINATAR_GAMES]
    if unknown or not args.games:
        parser.error(f"--games: {','.join(unknown) or 'none given'}; choose from {','.join(MINATAR_GAMES)}")
    args.carried = str(Path(args.carried or args.wheelhouse or ROOT / ".accelerator").resolve())
    if args.list:
        for row in ROWS:
            print(f"{row.name:14s} {row.about} (needs {', '.join(row.needs) or 'nothing more'})")
        return 0
    if args.worker:
        sys.path.insert(0, str(HERE))
        ctx = Context(
            args.worker,
            Path(args.results),
            args.deadline,
            args.smoke,
            args.carried,
            args.purejaxrl,
            args.games,
            args.budget_s,
        )
        WORKERS[args.worker](ctx)
        return 0
    if args.table:
        records = read_records(Path(args.table))
        headers = [r for r in records if r.get("header")]
        if not headers:
            parser.error(f"--table {args.table}: no header record (not an accelerator.jsonl)")
        text = table(headers[0], records)
        print(text)
        if args.save:
            kind = headers[0]["device"].split(" x")[0].lower().replace(" ", "_")
            path = HERE / "results" / f"{NAME}_{kind}.md"
            path.write_text(text)
            path.with_suffix(".jsonl").write_text(Path(args.table).read_text())
            print(f"saved {path} and {path.with_suffix('.jsonl')}")
        return 0
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="accelerator-"))
    return drive(args, out)


if __name__ == "__main__":
    sys.exit(main())
