"""``podracer.load(dir)``: the agent of a run's newest checkpoint, ready to act on a batch of observations in one
call (``policy.act(observations)``), as the run saw them.
"""

from __future__ import annotations

import os


class Policy:
    """A trained agent that acts: ``act(observations)`` takes a batch of observations (the environment's, as the
    run saw them) and returns a batch of actions, greedy by default (``greedy=False``: sampled with ``key``). A
    recurrent agent keeps its state between calls (``reset()`` starts episodes afresh)."""

    def __init__(self, directory: str):
        import jax

        from podracer.run import checkpoint, play
        from podracer.run import evaluate

        metadata, _ = checkpoint.newest_metadata(directory)
        self.spec = _spec_of(metadata)
        self.agent, self.params, self.metadata = evaluate.load(directory, self.spec)
        if getattr(self.agent, "plans", False) and metadata.get("agent") == "alphazero":
            raise ValueError(
                f"podracer.load: {directory} holds AlphaZero, which searches the game's own states; play it with "
                "podracer evaluate (or podracer.run.evaluate.play)."
            )
        self._policies = {g: play.policy(self.agent, g) for g in (True, False)}
        self._core, self._batch = None, None
        self._key = jax.random.key(0)

    def reset(self) -> None:
        """Forget a recurrent agent's state: the next call starts every episode."""
        self._core, self._batch = None, None

    def act(self, observations, key=None, *, greedy: bool = True, action_mask=None):
        """Actions for a batch of observations (``[B, ...]``, the leading axis the batch)."""
        import jax
        import jax.numpy as jnp

        self._check(observations)
        batch = jax.tree.leaves(observations)[0].shape[0]
        first = jnp.zeros((batch,), bool)
        if self._core is None or self._batch != batch:
            self._core, self._batch, first = self.agent.initial_state(batch), batch, jnp.ones((batch,), bool)
        if key is None:
            self._key, key = jax.random.split(self._key)
        action, self._core = self._policies[greedy](self.params, observations, key, self._core, first, action_mask)
        return action

    def _check(self, observations) -> None:
        """A ``ValueError`` naming both shapes when ``observations`` are not a batch of the checkpoint's."""
        import jax
        import numpy as np

        expected = self.spec.observation
        if isinstance(expected, dict):  # structured observations: each entry a batch of its own shape
            given = observations if isinstance(observations, dict) else {}
            pairs = [(f"[{k!r}]", given.get(k), v) for k, v in expected.items()]
        else:
            pairs = [("", observations, expected)]
        for where, value, spec in pairs:
            shape = tuple(np.shape(value)) if value is not None else None
            if shape is None or shape[1:] != tuple(spec.shape) or not np.issubdtype(np.asarray(value).dtype, np.number):
                got = "none" if shape is None else f"shape {shape}, dtype {np.asarray(value).dtype}"
                raise ValueError(
                    f"Policy.act: observations{where} of {got}; this checkpoint's agent acts on a batch of "
                    f"observations of shape {tuple(spec.shape)} ({jax.numpy.dtype(spec.dtype)}): pass "
                    f"[B, {', '.join(map(str, spec.shape))}]" + ("." if spec.shape else ", B the batch.")
                )


def _spec_of(metadata: dict):
    """The environment spec a checkpoint's agent was built for: its JAX environment's (wrapped as evaluation wraps
    it), or its host environment's."""
    from podracer.run import compose
    from podracer.core import envs
    from podracer.run import hostenvs
    from podracer.core.envs import wrappers

    name = metadata["env"].removeprefix("jax:")
    if metadata.get("mode") == "sebulba" and not envs.is_jax_on_host(metadata["env"]):
        env = hostenvs.make_host(name, 1, seed=0)
        try:
            return env.spec()
        finally:
            env.close()
    return wrappers.for_evaluation(compose.env_against(name, metadata.get("opponent", "random"))).spec()


def load(directory: str) -> Policy:
    """The agent of the newest checkpoint in ``directory`` (a ``--checkpoint-dir``), ready to act (:class:`Policy`)."""
    if not os.path.isdir(directory):
        raise ValueError(f"podracer.load: {directory!r} is not a directory (a --checkpoint-dir of a run).")
    return Policy(directory)


__all__ = ["Policy", "load"]
