"""Sebulba mode: host environments (envpool) on actor threads, a learner on other devices.

:func:`podracer.run.compose.train_sebulba` builds a run from a :class:`~podracer.run.config.SebulbaConfig`;
the pieces it assembles live here: actor threads (:mod:`~podracer.run.sebulba.actor`), queues and the
parameter store (:mod:`~podracer.run.sebulba.pipeline`), the learner loop (:mod:`~podracer.run.sebulba.learner_loop`)
and the lifetime that starts, joins and re-raises (:mod:`~podracer.run.sebulba.threads`).
"""

from podracer.run.sebulba.learner_loop import Schedule, SebulbaResult, learn
from podracer.run.sebulba.pipeline import ParamStore, Rollout, StopAwareQueue, Stopped
from podracer.run.sebulba.threads import run

__all__ = ["ParamStore", "Rollout", "Schedule", "SebulbaResult", "StopAwareQueue", "Stopped", "learn", "run"]
