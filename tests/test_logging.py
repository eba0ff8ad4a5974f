"""Metrics sinks: two runs sharing a log directory stay apart."""

import json

from podracer import logging


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
