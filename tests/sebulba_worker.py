"""One process of the 2-process Sebulba test: fake host environments, a learner averaged over both processes."""

import sys

from podracer.run import parallel
from podracer.run import multihost

port, process_id = sys.argv[1], int(sys.argv[2])
parallel.set_cpu_device_count(2)
multihost.initialize(f"127.0.0.1:{port}", 2, process_id)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from test_sebulba import FakeHostEnv  # noqa: E402

from podracer.core.agents import IMPALAConfig  # noqa: E402
from podracer.run.config import SebulbaConfig  # noqa: E402
from podracer.run.compose import train_sebulba as train  # noqa: E402

config = SebulbaConfig(
    env="fake",
    agent=IMPALAConfig().replace(hidden_sizes=(8,)),
    total_env_steps=2 * 8 * 4 * 5,
    num_envs_per_actor=8,
    rollout_length=4,
    actor_devices=(0,),
    learner_devices=(1,),
    log_every=5,
)
result = train(config, make_env=lambda seed, n: FakeHostEnv(n, length=3 + process_id))
checksum = sum(
    float(np.abs(np.asarray(leaf)).sum()) for leaf in jax.tree.leaves(parallel.unreplicate(result.state.params))
)
print(
    f"RESULT updates={result.updates} env_steps={result.history[-1]['env_steps']:.0f} checksum={checksum:.6f}",
    flush=True,
)
