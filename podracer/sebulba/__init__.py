"""Sebulba mode: host environments (envpool) on actor threads, a learner on other devices."""

from podracer.sebulba.pipeline import ParamStore, Rollout, StopAwareQueue, Stopped
from podracer.sebulba.run import SebulbaConfig, SebulbaResult, resolve_layout, run, train

__all__ = ["ParamStore", "Rollout", "SebulbaConfig", "SebulbaResult", "StopAwareQueue", "Stopped", "resolve_layout", "run", "train"]
