"""The Gumbel search both planning agents make (AlphaZero on the game's rules, MuZero on its learned model): mctx's
``gumbel_muzero_policy`` at a planning config's settings, its completed Q-values, and the prior's logits over the
legal moves."""

from __future__ import annotations

import functools

import jax.numpy as jnp

from podracer.core.agents.losses import mask_logits


def legal_logits(logits, action_mask):
    """A policy's logits over the legal moves only (shifted so that the largest is 0, as mctx expects)."""
    return mask_logits(logits - jnp.max(logits, axis=-1, keepdims=True), action_mask)


def completed_q(config):
    """mctx's completed Q-values (``qtransform_completed_by_mix_value``) at a planning config's ``value_scale`` and
    ``rescale_values``: what the improved policy adds to the prior's logits, inside the tree and at the root."""
    import mctx

    return functools.partial(
        mctx.qtransform_completed_by_mix_value, value_scale=config.value_scale, rescale_values=config.rescale_values
    )


def gumbel_search(config, params, key, root, recurrent_fn, logits, action_mask, qtransform=None):
    """``(action, extras)`` of mctx's ``gumbel_muzero_policy`` with a planning config's ``num_simulations``,
    ``max_num_considered_actions`` and ``gumbel_scale`` (``qtransform``: mctx's default when None), the root's
    invalid actions the mask's complement. Extras: the prior ``logits``, the improved policy (``policy_target``: the
    search's ``action_weights``) and the ``greedy`` action, the legal action it weighs most."""
    import mctx

    search = mctx.gumbel_muzero_policy(
        params,
        key,
        root,
        recurrent_fn,
        num_simulations=config.num_simulations,
        invalid_actions=None if action_mask is None else ~action_mask,
        max_num_considered_actions=config.max_num_considered_actions,
        gumbel_scale=config.gumbel_scale,
        **({} if qtransform is None else {"qtransform": qtransform}),
    )
    weights = search.action_weights
    greedy = jnp.argmax(mask_logits(weights, action_mask), axis=-1).astype(jnp.int32)
    return search.action.astype(jnp.int32), {"logits": logits, "policy_target": weights, "greedy": greedy}


def tree_bytes(num_simulations: int, batch: int, num_actions: int, embedding_bytes: int) -> int:
    """Bytes of the arrays of the trees one search of ``batch`` roots holds (``mctx.Tree``, as its docstring lists
    them: ``num_simulations + 1`` nodes a root, five ``[B, N]`` arrays and six ``[B, N, num_actions]`` ones of 4-byte
    numbers, and each node's ``embedding_bytes``): known from the settings alone, before anything is traced (tracing
    a search of 10^8 simulations takes minutes and more memory than the machine has)."""
    nodes = batch * (num_simulations + 1)
    return nodes * (5 * 4 + 6 * 4 * num_actions + embedding_bytes)


__all__ = ["completed_q", "gumbel_search", "legal_logits", "tree_bytes"]
