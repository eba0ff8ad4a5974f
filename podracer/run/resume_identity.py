"""What a resumed run must share with its checkpoint: the settings that shape the saved state or the env-step count,
by flag (:func:`podracer.run.compose.resume_identity` records them), and the one-line refusal that names each that
differs."""

from __future__ import annotations

import json

# What a flag's absence from an identity means: recorded only where it is not this (a run without --population,
# against the random player), or not recorded by older checkpoints (which all used Adam before --update-rule was);
# a key absent on one side is compared as this value.
ABSENT = {
    "--population": None,
    "--pbt-search": [],
    "--update-rule": "adam",
    # normalisation's options, recorded where set away from these (podracer.run.config.NORMALIZE_OPTIONS)
    "--observation-clip": 5.0,
    "--normalize-with": "updated",
    "--return-restart": "episode",
}
# Run flags that shape no saved state, recorded in the metadata (by key): a resume may change them, and says so.
SAID = {"opponent": ("--opponent", "random")}
_UNKNOWN = object()  # a key an older checkpoint did not record: not compared


def check_resume_identity(directory: str, saved: dict, identity: dict) -> None:
    """A ``ValueError`` naming every flag whose value in ``identity`` (this run's) differs from the checkpoint's
    ``saved`` metadata, with both values, the keys of either side compared (a flag recorded on one side only
    differs unless the other side's absence means the same, :data:`ABSENT`); older checkpoints' metadata
    (:func:`identity_of_older`) too."""
    theirs = dict(saved.get("resume_identity") or identity_of_older(saved))
    for flag, _ in SAID.values():  # identities written before it was said rather than refused
        theirs.pop(flag, None)
    hyper = saved.get("agent_hyperparameters", {})  # every hyper-parameter, by name: what older identities lacked
    for key in identity:
        name = key.removeprefix("--").replace("-", "_")
        if key not in theirs and key.startswith("--") and name in hyper:
            theirs[key] = hyper[name]
    differ = []
    for key in [*identity, *(k for k in theirs if k not in identity)]:
        there, here = (side.get(key, ABSENT.get(key, _UNKNOWN)) for side in (theirs, identity))
        if there is not _UNKNOWN and here is not _UNKNOWN and there != here:
            differ.append((key, there, here))
    if differ:
        shown = "; ".join(f"{k} {_shown(there)} there, {_shown(here)} here" for k, there, here in differ)
        raise ValueError(
            f"--resume: {directory!r} holds a checkpoint of another run: {shown}. Resume with its settings, or "
            "choose another --checkpoint-dir."
        )


def changes_said(saved: dict, hyperparameters: dict, run: dict | None = None) -> str:
    """The line a resume says when it changes hyper-parameters that shape no saved state (``resuming with
    --unroll-steps 3 (was 5)``; "" when none changed): ``saved``, the checkpoint's metadata; ``hyperparameters``,
    this run's agent's by flag name; ``run``, this run's :data:`SAID` flags by metadata key (``{"opponent":
    "perfect"}``). Those that do shape it were refused before (:func:`check_resume_identity`)."""
    before = saved.get("agent_hyperparameters", {})
    now = json.loads(json.dumps(hyperparameters))  # as the checkpoint recorded them: tuples as lists
    changed = [
        (f"--{name.replace('_', '-')}", before[name], value)
        for name, value in now.items()
        if name in before and before[name] != value
    ]
    for key, value in (run or {}).items():
        flag, absent = SAID[key]
        if saved.get(key, absent) != value:
            changed.append((flag, saved.get(key, absent), value))
    if not changed:
        return ""
    return "resuming with " + ", ".join(f"{flag} {_shown(value)} (was {_shown(was)})" for flag, was, value in changed)


def identity_of_older(saved: dict) -> dict:
    """What a checkpoint written before ``resume_identity`` was recorded says of its run, by flag."""
    keys = {"mode": "mode", "--env": "env", "--agent": "agent", "--rollout-length": "rollout_length"}
    normalize = saved.get("normalize") or ""
    older = {flag: saved[key] for flag, key in keys.items() if key in saved}
    older["--normalize-observations"] = "observations" in normalize
    older["--normalize-rewards"] = "rewards" in normalize
    return older


def _shown(value) -> str:
    if value is None or value == []:
        return "none"
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


__all__ = ["ABSENT", "SAID", "changes_said", "check_resume_identity", "identity_of_older"]
