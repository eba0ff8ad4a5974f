"""Sebulba mode: host environments (envpool) on actor threads, a learner on other devices.

:func:`podracer.experiment.train_sebulba` builds a run from a :class:`~podracer.config.SebulbaConfig`;
the pieces it assembles live here: actor threads (:mod:`~podracer.sebulba.actor`), queues and the
parameter store (:mod:`~podracer.sebulba.pipeline`), the learner loop (:mod:`~podracer.sebulba.learner_loop`)
and the lifetime that starts, joins and re-raises (:mod:`~podracer.sebulba.run`).
"""

from podracer.sebulba.learner_loop import Schedule, SebulbaResult, learn
from podracer.sebulba.pipeline import ParamStore, Rollout, StopAwareQueue, Stopped
from podracer.sebulba.run import run

__all__ = ["ParamStore", "Rollout", "Schedule", "SebulbaResult", "StopAwareQueue", "Stopped", "learn", "run"]
