"""gymnasium environments that fail after a number of steps, for tests/test_host_faults.py (``--env
gymnasium:faulty_envs:Raising-v0``): one raises, one hangs."""

import time

import gymnasium as gym
import numpy as np


class Faulty(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fault: str = "raise", after: int = 200):
        self.fault, self.after, self.steps = fault, after, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps > self.after:
            if self.fault == "raise":
                raise ValueError("the simulator lost its state")
            time.sleep(3600)
        return np.zeros(4, np.float32), 1.0, False, self.steps % 10 == 0, {}


gym.register("Raising-v0", entry_point=Faulty, kwargs={"fault": "raise"})
gym.register("Hanging-v0", entry_point=Faulty, kwargs={"fault": "hang"})
