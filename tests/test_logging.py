"""Metrics sinks: two runs sharing a log directory stay apart."""

import json

from podracer.run import logging


def test_two_runs_started_together_in_one_log_dir_keep_their_events_and_records_apart(tmp_path):
    first = logging.make_logger(str(tmp_path), console=False)
    second = logging.make_logger(str(tmp_path), console=False, process=0)  # the same second, the same host
    with first, second:
        for step in (100, 200):
            first({"env_steps": step, "episode_return": 1.0})
            second({"env_steps": step, "episode_return": 2.0})
    events = sorted(tmp_path.glob("events.out.tfevents.*"))
    assert len(events) == 2 and all(e.stat().st_size > 0 for e in events)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    by_run = {}
    for record in records:
        assert record["process"] == 0
        by_run.setdefault(record["run_id"], []).append(record["episode_return"])
    assert sorted(by_run.values()) == [[1.0, 1.0], [2.0, 2.0]]
    for run_id in by_run:  # each event file is named after its run
        assert sum(e.name.endswith(run_id) for e in events) == 1


def _events(path):
    """The ``Event`` records of a TensorBoard event file (TFRecord framing: length, its CRC, data, its CRC)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (length,) = struct.unpack("Q", data[at : at + 8])
        out.append(Event.FromString(data[at + 12 : at + 12 + length]))
        at += 12 + length + 4
    return out


def test_tensorboard_events_hold_every_finite_scalar_against_env_steps(tmp_path):
    with logging.make_logger(str(tmp_path), console=False, run_id="r1") as logger:
        logger({"env_steps": 100, "episode_return": 1.5, "loss": float("nan"), "per_seed": [2.0, 3.0]})
        logger({"env_steps": 200, "episode_return": 2.5, "loss": 0.25, "per_seed": [4.0, 5.0]})
    (path,) = tmp_path.glob("events.out.tfevents.*.r1")
    scalars = [(e.step, v.tag, v.simple_value) for e in _events(path) for v in e.summary.value]
    assert scalars == [
        (100, "episode_return", 1.5),
        (100, "per_seed/0", 2.0),
        (100, "per_seed/1", 3.0),
        (200, "episode_return", 2.5),
        (200, "loss", 0.25),
        (200, "per_seed/0", 4.0),
        (200, "per_seed/1", 5.0),
    ]


def test_a_device_that_fills_under_a_sink_is_one_line_naming_the_log_dir(tmp_path, monkeypatch):
    """Another writer took the room: the write fails with ENOSPC (here /dev/full), and the run's error is one line;
    closing the logger afterwards neither raises again nor waits."""
    import pytest
    import tensorboardX.record_writer

    from podracer.run.disk import DiskFull

    (tmp_path / "jsonl").mkdir()
    os_link = tmp_path / "jsonl" / "metrics.jsonl"
    os_link.symlink_to("/dev/full")
    logger = logging.make_logger(str(tmp_path / "jsonl"), console=False)
    with pytest.raises(DiskFull) as full:
        with logger:
            logger({"env_steps": 100, "episode_return": 1.0})
    assert str(full.value) == (
        f"--log-dir {str(tmp_path / 'jsonl')!r}: the device is full (writing {os_link}); free some space and "
        "continue with --resume, into another --log-dir where this one holds lines past the newest checkpoint "
        "(nothing is lost or written twice)."
    )
    monkeypatch.setattr(tensorboardX.record_writer, "open_file", lambda path: open("/dev/full", "wb"))
    sink = logging.TensorBoardSink(str(tmp_path / "tb"))
    with pytest.raises(DiskFull, match=r"the device is full \(writing its TensorBoard events\)"):
        sink.write({"env_steps": 100, "episode_return": 1.0})
    sink.close()


def test_the_closing_line_gives_the_greedy_evaluation_beside_the_training_return_and_never_a_late_nan():
    from podracer.run import logging as logging_lib

    nan = float("nan")
    trained = [{"env_steps": 100, "episode_return": 0.5}, {"env_steps": 200, "episode_return": 0.75, "episodes": 12.0}]
    assert logging_lib.closing(trained) == ("final training return 0.750 over 12 episodes", 0.75)
    seeds = [{"env_steps": 200, "episode_return": 0.75, "episodes": 2.5, "episode_return_per_seed": [0.5, 1.0]}]
    assert logging_lib.closing(seeds)[0] == "final training return 0.750 over 2.5 episodes per seed"
    assert logging_lib.closing(trained[:1]) == ("final training return 0.500", 0.5)  # episodes not counted: not said
    long_episodes = [
        {"env_steps": 100, "episode_return": -40.0, "episodes": 1.0},
        {"env_steps": 200, "episode_return": nan, "episodes": 0.0},
    ]
    text, value = logging_lib.closing(long_episodes)  # MountainCarContinuous: no 999-step episode in the last window
    assert value == -40.0 and "nan" not in text
    assert text == (
        "final training return -40.000 over 1 episode (no episode ended in the last window; this is the window to "
        "100 env steps)"
    )
    corner = [{"env_steps": 100, "episode_return": 1.0, "eval_return": 0.0}]  # the greedy policy turns forever
    text, value = logging_lib.closing(corner)
    assert value == 0.0 and text.startswith(
        "final greedy evaluation return 0.000; training return 1.000 (they disagree"
    )
    agree = [{"env_steps": 100, "episode_return": 0.994, "eval_return": 1.0}]
    assert logging_lib.closing(agree) == ("final greedy evaluation return 1.000; training return 0.994", 1.0)
    sampled = logging_lib.closing([{"env_steps": 100, "episode_return": -400.0, "eval_return": -300.0}], "sampled")
    assert sampled == (
        "final sampled evaluation return -300.000; training return -400.000 (they disagree by 100.000: the sampled "
        "policy, as evaluate plays it, scores -300.000 on fresh environments; the training episodes -400.000)",
        -300.0,
    )
    assert logging_lib.closing([{"env_steps": 1, "episode_return": nan}])[0].endswith("(no episode ended in the run)")


def test_a_games_closing_line_names_what_each_figure_played_against_and_compares_no_unlike_figures():
    """AlphaZero in self-play closed on "final greedy evaluation return 0.938; training return 0.785 (they disagree
    by 0.153 ...)": wins minus losses against random moves beside self-play games. A game against a fixed opponent
    names it on both figures, which are alike and may disagree."""
    from podracer.run import logging as logging_lib

    last = [{"env_steps": 100, "episode_return": 0.785, "eval_return": 0.938}]
    text, value = logging_lib.closing(last, "greedy", "itself (self-play)", self_play=True)
    assert (text, value) == (
        "final greedy evaluation return 0.938 against random legal moves (wins minus losses); self-play training "
        "return 0.785",
        0.938,
    )
    text, _ = logging_lib.closing(last, "greedy", "random legal moves")
    assert text.startswith(
        "final greedy evaluation return 0.938 against random legal moves; training return 0.785 against random legal "
        "moves (they disagree by 0.153"
    )
    trained = [{"env_steps": 100, "episode_return": 0.2, "episodes": 8.0}]
    assert logging_lib.closing(trained, opponent="itself (self-play)", self_play=True)[0] == (
        "final self-play training return 0.200 over 8 episodes"
    )
