"""Sebulba's pieces: queues and the parameter store, actor threads, the learner loop, the threads' lifetime, and a run
assembled from them (the public names: :mod:`podracer.sebulba`)."""
