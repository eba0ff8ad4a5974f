"""The line each mode says before it starts: agent, task, devices, environments, seeds or settings, and what a
two-player game plays against.
"""

from __future__ import annotations

import jax

from podracer.run import parallel


LINE_WIDTH = 120  # what a run says before it starts, in lines of at most this many characters


def _pieces(line: str) -> list[str]:
    """``line`` cut where it may break: after ``; ``, ``, `` or ``: ``, and before `` --FLAG``, outside brackets
    and parentheses (``learner devices [1, 2049]`` stays whole)."""
    pieces, start, depth = [], 0, 0
    for i, char in enumerate(line):
        depth += (char in "([{") - (char in ")]}")
        if depth:
            continue
        if line[i : i + 2] in ("; ", ", ", ": "):
            pieces.append(line[start : i + 2])
            start = i + 2
        elif line[i : i + 3] == " --" and i > start:
            pieces.append(line[start:i])
            start = i
    return [*pieces, line[start:]]


def in_lines(text: str, width: int = LINE_WIDTH, indent: str = "  ") -> str:
    """``text`` (one line or several) broken into lines of at most ``width`` characters where that can be done
    between its clauses (after ``; ``, ``, `` or ``: ``, before `` --FLAG``, never inside brackets), the lines after
    the first of each indented by ``indent``; a clause longer than a line is kept whole."""
    out = []
    for line in text.split("\n"):
        current = ""
        for piece in _pieces(line):
            if current and len(current.rstrip()) + len(piece.rstrip()) > width:
                out.append(current.rstrip())
                current = indent + piece.lstrip()
            else:
                current += piece
        out.append(current.rstrip())
    return "\n".join(out)


def opponent_field(env) -> dict:
    """What a two-player game's run is against (``opponent`` in every ``metrics.jsonl`` record), as the
    environment names it."""
    opponent = getattr(env, "opponent_name", None)
    return {"opponent": opponent} if opponent else {}


def against(opponent: str | None) -> str:
    """`` against OPPONENT`` for a banner, or nothing."""
    return f" against {opponent}" if opponent else ""


def anakin_banner(config, plan, resume_step: int | None, opponent: str | None = None) -> str:
    """The line an Anakin run says before it starts: agent, task, devices, environments, seeds or settings (``plan``:
    the run's :class:`~podracer.run.plan.RunPlan`)."""
    per_device = plan.envs_per_batch
    num_global = plan.num_envs // per_device
    seeds = f", seeds {config.seed} ... {config.seed + config.num_seeds - 1} together" if config.num_seeds > 1 else ""
    if config.sweep:
        points = len(config.sweep_points)
        seeds = f", {points} settings x {config.num_seeds} seed(s) = {points * config.num_seeds} runs together" + (
            f" (seeds {config.seed} ... {config.seed + config.num_seeds - 1})" if config.num_seeds > 1 else ""
        )
    if config.population:
        names, every = ", ".join(spec.partition("=")[0] for spec in config.pbt_search), config.pbt_every
        seeds = f", a population of {config.population} lanes searching {names} (ranked every "
        seeds += f"{every or config.updates_per_call} updates)"
    resume = f"; resuming after {resume_step} updates" if resume_step is not None else ""
    steps = plan.env_steps(plan.num_updates)
    budget = f" = {steps:,} env steps" if config.total_env_steps else ""
    if config.total_env_steps and steps != config.total_env_steps:  # rounded up to whole host calls
        budget += (
            f" (--total-env-steps {config.total_env_steps:,} + {steps - config.total_env_steps:,}: whole calls of "
            f"--updates-per-call {config.updates_per_call})"
        )
    return in_lines(
        f"podracer anakin: {config.agent_name} on {config.env}{against(opponent)}, {num_global} device(s) in "
        f"{parallel.process_count()} "
        f"process(es) [{jax.default_backend()}], {per_device} envs per device, rollout {config.rollout_length}, "
        f"{plan.num_updates} updates{budget}{seeds}{resume}"
    )


def sebulba_banner(
    config,
    env_name: str,
    first_env,
    layout: parallel.Layout,
    per_actor: int,
    num_groups: int,
    updates: int,
    unroll: bool,
) -> str:
    """What a Sebulba run says before it starts: the agent, the task, the device layout; the CPU's pace for images
    (devices shared by actors and the learner are refused: :func:`podracer.run.parallel.resolve_layout`)."""
    opponent = against(getattr(first_env, "opponent_name", None))
    lines = [
        f"podracer sebulba: {config.agent_name} on {env_name}{opponent}; actor devices "
        f"{[d.id for d in layout.actor_devices]} x {config.actor_threads} thread(s) x {per_actor} envs "
        f"({num_groups} group(s)); learner devices {[d.id for d in layout.learner_devices]} in "
        f"{parallel.process_count()} process(es)" + (f"; resuming after {updates} updates" if updates else "")
    ]
    if unroll:  # image observations with a convolutional torso, learned on the CPU
        lines.append(
            "podracer sebulba: image observations on the CPU: every actor and learner step runs the "
            "convolutional torso on the CPU cores, about 40 env steps/s for Pong on 2 cores (IMPALA, "
            "measured), so the first progress line takes minutes; an accelerator runs it at 13-14k env "
            "steps/s (one H100)"
        )
    if config.preset is None and config.command_line_agent(config.env) == "impala":  # an Atari game
        lines.append(
            f"podracer sebulba: {config.env} with this command's defaults; --preset pong is a recipe made to reach "
            "18+ on Pong within 10M env steps on a GPU box (PPO at CleanRL's envpool settings; --preset list)"
        )
    return in_lines("\n".join(lines))


__all__ = ["LINE_WIDTH", "against", "anakin_banner", "in_lines", "opponent_field", "sebulba_banner"]
