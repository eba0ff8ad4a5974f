"""Does envpool step the MuJoCo rows' tasks as gymnasium does? The same start and the same actions, side by side.

The reproduction table's MuJoCo rows (``InvertedPendulum-v4``, ``HalfCheetah-v4``, ``Pusher-v4``) step envpool's C++
ports of gymnasium's environments, in the MuJoCo that envpool bundles; the figures they are compared with were
measured by CleanRL on gymnasium's Python environments, in the MuJoCo ``mujoco`` installs beside it
(``benchmarks/source_runs.py`` runs that code here). This script asks whether the two environments differ: for each
task it resets envpool's environment, puts gymnasium's (in another Python, ``--gymnasium-python``: gymnasium and
``mujoco``, as CleanRL pins them) into the same state, acts on both alike, and prints the largest differences of
observations and rewards per step range, and whether the episodes end at the same step.

- The start: envpool's reset noise off (``reset_noise_scale=0``) where it has one, gymnasium's state set to its
  model's initial one; Pusher's object position, which both draw at random, read from envpool's first observation
  and written into gymnasium's state (``set_state``).
- The actions: the same noise on both sides (uniform over ``--action-scale`` of the bounds), plus, for the inverted
  pendulum, a stabilising linear feedback on each side's own observations (:data:`FEEDBACK`): acting at random
  drops the pole within 13 steps, and actions replayed open loop would let rounding differences of 1e-16 grow in
  the unstable system until the episodes part, which would say nothing of the dynamics.

``python benchmarks/mujoco_dynamics.py --gymnasium-python /tmp/cleanrl-venv/bin/python`` prints the table (with
``--save``, into ``benchmarks/results/mujoco_dynamics.md``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import _report  # benchmarks/_report.py (the script's folder is on sys.path)

TASKS = ("InvertedPendulum-v4", "HalfCheetah-v4", "Pusher-v4")  # the reproduction table's MuJoCo rows
# A stabilising linear feedback (action = gain @ observation, plus the noise) where open-loop actions end an episode
# within steps: the inverted pendulum's (cart position, pole angle, their velocities), found by trying a few
FEEDBACK = {"InvertedPendulum-v4": [[2.0, 10.0, 0.5, 1.0]]}
RANGES = ((0, 1), (1, 10), (10, 50), (50, None))  # step ranges reported: the start, then growing windows
PUSHER_OBJECT_BODY = (0.45, -0.05)  # pusher.xml's object body position (x, y): its slide joints count from it

# Run in gymnasium's Python: ARGV[1] a .npz of the envpool side (task, actions, observations); prints JSON of
# gymnasium's observations, rewards and terminations from the same start under the same actions.
GYMNASIUM_SIDE = """
import json, sys
import gymnasium as gym, mujoco, numpy as np
data = np.load(sys.argv[1])
task, noise, gain, first = str(data["task"]), data["noise"], data["gain"], data["observations"][0]
env = gym.make(task)
env.reset(seed=0)
u = env.unwrapped
qpos, qvel = u.init_qpos.copy(), u.init_qvel.copy()
if task.startswith("Pusher"):
    qpos[:7], qvel[:7] = first[:7], first[7:14]
    x, y = json.loads(sys.argv[2])
    qpos[7], qpos[8] = first[18] - y, first[17] - x  # the object's joints: obj_slidey, then obj_slidex
    qpos[9:11], qvel[7:] = 0.0, 0.0
u.set_state(qpos, qvel)
observations, rewards, ends = [u._get_obs()], [], []
for step_noise in noise:
    action = np.clip(step_noise + gain @ observations[-1], env.action_space.low, env.action_space.high)
    observation, reward, terminated, truncated, _ = env.step(action.astype(np.float32))
    observations.append(observation)
    rewards.append(float(reward))
    ends.append(bool(terminated))
    if terminated or truncated:
        break
print(json.dumps({"observations": np.asarray(observations, np.float64).tolist(), "rewards": rewards, "ends": ends,
                  "versions": f"gymnasium {gym.__version__}, mujoco {mujoco.__version__}"}))
"""


def envpool_side(task: str, steps: int, action_scale: float, seed: int) -> dict:
    """envpool's episode from a noiseless start: the exploration noise (uniform over ``action_scale`` of the bounds),
    the feedback gain (:data:`FEEDBACK`), observations (the first included), rewards and terminations, up to
    ``steps`` steps or the episode's end."""
    import envpool

    config = envpool.make_spec(task).config._asdict()
    noiseless = {"reset_noise_scale": 0.0} if "reset_noise_scale" in config else {}
    env = envpool.make_gymnasium(task, num_envs=1, seed=seed, **noiseless)
    low, high = env.action_space.low, env.action_space.high
    rng = np.random.default_rng(seed)
    observation, _ = env.reset()
    size, observed = low.shape[0], observation.shape[-1]
    gain = np.asarray(FEEDBACK.get(task, np.zeros((size, observed))), np.float64).reshape(size, observed)
    noise, observations, rewards, ends = [], [observation[0].astype(np.float64)], [], []
    for _ in range(steps):
        noise.append(rng.uniform(low, high) * action_scale)
        action = np.clip(noise[-1] + gain @ observations[-1], low, high).astype(np.float32)
        observation, reward, terminated, truncated, _ = env.step(action[None])
        observations.append(observation[0].astype(np.float64))
        rewards.append(float(reward[0]))
        ends.append(bool(terminated[0]))
        if terminated[0] or truncated[0]:  # (envpool's next step would start a new episode)
            break
    return {
        "noise": np.asarray(noise),
        "gain": gain,
        "observations": np.asarray(observations),
        "rewards": rewards,
        "ends": ends,
    }


def gymnasium_side(python: str, task: str, ours: dict, folder: Path) -> dict:
    """gymnasium's episode (run in ``python``) from envpool's start, acting as envpool's side acted (the same noise,
    the same feedback on its own observations)."""
    path = folder / f"{task}.npz"
    np.savez(path, task=task, noise=ours["noise"], gain=ours["gain"], observations=ours["observations"])
    command = [python, "-c", GYMNASIUM_SIDE, str(path), json.dumps(PUSHER_OBJECT_BODY)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"mujoco_dynamics.py: gymnasium's side of {task} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def compare(task: str, ours: dict, theirs: dict) -> dict:
    """The largest observation and reward differences per step range over the steps both sides took, and where
    each side's episode ended."""
    observations = np.asarray(theirs["observations"])
    shared = min(len(observations), len(ours["observations"]))
    gap = np.max(np.abs(observations[:shared] - ours["observations"][:shared]), axis=1)
    reward_gap = np.abs(np.asarray(theirs["rewards"][: shared - 1]) - np.asarray(ours["rewards"][: shared - 1]))
    ranges = {}
    for start, stop in RANGES:
        if start < shared:
            end = min(stop or shared, shared)
            ranges[f"{start}-{end - 1}"] = float(np.max(gap[start:end]))
    return {
        "task": task,
        "steps": shared - 1,
        "envpool_end": len(ours["ends"]) if ours["ends"] and ours["ends"][-1] else None,
        "gymnasium_end": len(theirs["ends"]) if theirs["ends"] and theirs["ends"][-1] else None,
        "observation_gap": ranges,
        "reward_gap": float(np.max(reward_gap)) if len(reward_gap) else 0.0,
    }


def table(results: list[dict], header: str) -> str:
    columns = [f"{start}-{'end' if stop is None else stop - 1}" for start, stop in RANGES]
    lines = [
        header,
        "",
        "| task | steps compared | " + " | ".join(f"obs gap, steps {c}" for c in columns) + " | reward gap | "
        "terminated at (envpool, gymnasium) |",
        "|---|---:|" + "---:|" * len(columns) + "---:|---|",
    ]
    for r in results:
        gaps = list(r["observation_gap"].values()) + ["-"] * (len(columns) - len(r["observation_gap"]))
        shown = [g if isinstance(g, str) else f"{g:.1e}" for g in gaps]
        ends = f"{r['envpool_end'] or '-'}, {r['gymnasium_end'] or '-'}"
        lines.append(f"| {r['task']} | {r['steps']} | {' | '.join(shown)} | {r['reward_gap']:.1e} | {ends} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gymnasium-python", required=True, help="a Python with gymnasium and mujoco (CleanRL's)")
    parser.add_argument("--tasks", default=",".join(TASKS), help=f"comma-separated, of {', '.join(TASKS)}")
    parser.add_argument("--steps", type=int, default=1000, help="steps of each episode at most (it may end first)")
    parser.add_argument("--action-scale", type=float, default=0.3, help="actions uniform over this share of bounds")
    parser.add_argument("--seed", type=int, default=0)
    _report.add_output_flags(parser, "mujoco_dynamics")
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        parser.error(f"--tasks: {', '.join(unknown)} is not one of {', '.join(TASKS)}")
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    import envpool

    results, versions = [], ""
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            ours = envpool_side(task, args.steps, args.action_scale, args.seed)
            theirs = gymnasium_side(args.gymnasium_python, task, ours, Path(tmp))
            versions = theirs["versions"]
            results.append(compare(task, ours, theirs))
    header = (
        f"envpool {envpool.__version__} beside {versions} ({args.gymnasium_python}), on {_report.cpu_model()}: the "
        f"largest absolute difference of any observation entry over each range of steps (step 0: the start), of the "
        f"reward, and the step each episode terminated at, acting alike (the same noise, uniform over "
        f"{args.action_scale} of the bounds, seed {args.seed}; the inverted pendulum's plus the same feedback on "
        f"each side's own observations); `python benchmarks/mujoco_dynamics.py --gymnasium-python PY --steps "
        f"{args.steps}`"
    )
    text = table(results, header)
    print(text)
    _report.save(_report.output_path(args.save, args.out, "mujoco_dynamics"), text, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
