"""podracer: Anakin and Sebulba reinforcement learning in JAX."""

from podracer import agents, anakin, config, envs, learner, logging, networks, parallel
from podracer.agents import Agent
from podracer.anakin import AnakinState, RolloutState
from podracer.config import AnakinConfig, RunConfig, SebulbaConfig
from podracer.envs import EnvSpec, Environment, HostEnv
from podracer.learner import make_learner_step, make_optimizer
from podracer.types import EpisodeStats, LearnerState, TimeStep, Trajectory

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AnakinConfig",
    "AnakinState",
    "EnvSpec",
    "Environment",
    "EpisodeStats",
    "HostEnv",
    "LearnerState",
    "RolloutState",
    "RunConfig",
    "SebulbaConfig",
    "TimeStep",
    "Trajectory",
    "agents",
    "anakin",
    "config",
    "envs",
    "learner",
    "logging",
    "make_learner_step",
    "make_optimizer",
    "networks",
    "parallel",
]
