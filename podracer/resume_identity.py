"""What a resumed run must share with its checkpoint: the settings that shape the saved state or the env-step count,
by flag (:func:`podracer.build.resume_identity` records them), and the one-line refusal that names each that differs."""

from __future__ import annotations


def check_resume_identity(directory: str, saved: dict, identity: dict) -> None:
    """A ``ValueError`` naming every flag whose value in ``identity`` (this run's) differs from the checkpoint's
    ``saved`` metadata, with both values; older checkpoints' metadata (:func:`identity_of_older`) too."""
    theirs = saved.get("resume_identity") or identity_of_older(saved)
    differ = [k for k, v in identity.items() if theirs.get(k, v) != v]
    if differ:
        shown = "; ".join(f"{k} {_shown(theirs[k])} there, {_shown(identity[k])} here" for k in differ)
        raise ValueError(
            f"--resume: {directory!r} holds a checkpoint of another run: {shown}. Resume with its settings, or "
            "choose another --checkpoint-dir."
        )


def identity_of_older(saved: dict) -> dict:
    """What a checkpoint written before ``resume_identity`` was recorded says of its run, by flag."""
    keys = {"mode": "mode", "--env": "env", "--agent": "agent", "--rollout-length": "rollout_length"}
    normalize = saved.get("normalize") or ""
    older = {flag: saved[key] for flag, key in keys.items() if key in saved}
    older["--normalize-observations"] = "observations" in normalize
    older["--normalize-rewards"] = "rewards" in normalize
    return older


def _shown(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


__all__ = ["check_resume_identity", "identity_of_older"]
