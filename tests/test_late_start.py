"""A start-up barrier that a process reaches late: the process that waited names the late one and tells it; the late
one says that it was late, rather than blaming the process that waited for it."""

import time

import pytest

from podracer.run import multihost


class FakeClient:
    """The coordinator's key-value store and a barrier that times out."""

    def __init__(self, store):
        self.store = dict(store)

    def key_value_set(self, key, value, allow_overwrite=False):
        self.store[key] = value

    def key_value_try_get(self, key):
        if key not in self.store:
            raise RuntimeError(f"NOT_FOUND: {key}")
        return self.store[key]

    def wait_at_barrier(self, name, timeout_ms):
        raise RuntimeError("DEADLINE_EXCEEDED: Barrier timed out")


@pytest.fixture
def two_processes(monkeypatch):
    def as_process(me, store):
        client = FakeClient(store)
        monkeypatch.setattr(multihost, "_distributed_client", lambda: client)
        monkeypatch.setattr(multihost.jax, "process_count", lambda: 2)
        monkeypatch.setattr(multihost.jax, "process_index", lambda: me)
        monkeypatch.setattr(multihost, "_RUN", multihost._Run())
        multihost._RUN.timeout = 45
        multihost._RUN.peers = {1 - me: ("7", time.monotonic())}  # the other one beats: alive
        multihost._RUN.answered = time.monotonic()
        return client

    monkeypatch.setattr(multihost.time, "sleep", lambda seconds: None)
    return as_process


def test_the_process_that_waited_names_the_late_one_and_tells_it(two_processes):
    client = two_processes(0, {})
    with pytest.raises(multihost.LateProcesses, match=r"^process 1 did not reach the compiled update within 45 s"):
        multihost.all_arrive("the compiled update")
    assert client.store["podracer/late/1"] == "the compiled update|45"


def test_the_late_process_says_it_was_late(two_processes, monkeypatch, capsys):
    two_processes(1, {"podracer/arrived/the compiled update/1/0": "1"})  # process 0 was there first

    def exit_(status):
        raise SystemExit(status)

    monkeypatch.setattr(multihost.os, "_exit", exit_)
    with pytest.raises(SystemExit) as ended:
        multihost.all_arrive("the compiled update")
    assert ended.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "podracer: error: this process (process 1) reached the compiled update more than 45 s "
        "(--distributed-timeout) after the others, which have ended the run: it was still starting or compiling on "
        "a busy machine; raise --distributed-timeout on every process."
    ]
