"""Sebulba mode: host environments (envpool) on actor threads, a learner on other devices.

:func:`podracer.run.compose.train_sebulba` builds a run from a :class:`~podracer.run.config.SebulbaConfig`;
the pieces it assembles live here: actor threads (:mod:`~podracer.run.sebulba.actor`), queues and the
parameter store (:mod:`~podracer.run.sebulba.pipeline`), the learner loop (:mod:`~podracer.run.sebulba.learner_loop`)
and the lifetime that starts, joins and re-raises (:mod:`~podracer.run.sebulba.threads`).
"""

from podracer.run.sebulba.assemble import train
from podracer.run.sebulba.learner_loop import Hooks, SebulbaResult, learn
from podracer.run.sebulba.pipeline import ParamStore, Rollout, StopAwareQueue, Stopped
from podracer.run.sebulba.threads import run

__all__ = ["Hooks", "ParamStore", "Rollout", "SebulbaResult", "StopAwareQueue", "Stopped", "learn", "run", "train"]
