"""`podracer preview` beside a run that rotates its checkpoints, before a run has started, and at a wrong path."""

import os
import shutil
import threading

import pytest

from podracer.run import compose, preview
from podracer.cli import preview as preview_command
from podracer.run.config import AnakinConfig

SMALL = dict(num_envs_per_device=4, rollout_length=4, updates_per_call=10, checkpoint_every=10)


@pytest.mark.slow
def test_a_checkpoint_rotated_away_while_it_is_read_is_not_an_error(tmp_path, monkeypatch):
    directory = tmp_path / "run"
    compose.train_anakin(AnakinConfig(num_updates=20, checkpoint_dir=str(directory), **SMALL))
    real, calls = preview._play, []

    def rotated_while_reading(evaluate, config, drawable):
        calls.append(1)
        if len(calls) == 1:  # the run deletes step_20 while the preview reads it
            shutil.rmtree(directory / "step_20")
            os.remove(directory / "step_20.json")
            raise FileNotFoundError("step_20 vanished")
        return real(evaluate, config, drawable)

    monkeypatch.setattr(preview, "_play", rotated_while_reading)
    lines = []
    played = preview.watch(preview.PreviewConfig(str(directory), poll_seconds=0.05), report=lines.append, timeout=60)
    assert played == [10] and len(calls) == 2, (played, lines)
    assert lines[-1] == "the run has ended; played 1 checkpoint(s)."


@pytest.mark.slow
def test_beside_a_run_that_saves_every_call_the_preview_plays_and_ends_with_it(tmp_path):
    directory = tmp_path / "run"
    directory.mkdir()
    run = threading.Thread(
        target=compose.train_anakin, args=(AnakinConfig(num_updates=200, checkpoint_dir=str(directory), **SMALL),)
    )
    lines = []
    run.start()  # the preview starts before the run's first checkpoint, and sees the run rotate its newest 3
    played = preview.watch(preview.PreviewConfig(str(directory), poll_seconds=0.05), report=lines.append, timeout=300)
    run.join()
    assert played and played[-1] == 200 and played == sorted(played), (played, lines)
    assert (
        lines[0]
        == f"{directory} holds no checkpoint yet: waiting for a run to save one there (--wait SECONDS to give up)."
    )
    assert lines[-1] == f"the run has ended; played {len(played)} checkpoint(s)."


def test_a_missing_directory_is_waited_for_or_with_wait_0_refused_and_a_file_is_refused(tmp_path, capsys):
    missing = tmp_path / "not-yet"
    assert preview_command.main(["--checkpoint-dir", str(missing), "--wait", "0"], name="podracer preview") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"podracer preview: error: --checkpoint-dir {str(missing)!r} does not exist (after --wait 0 s)."
    ]
    lines = []
    assert preview.watch(preview.PreviewConfig(str(missing), poll_seconds=0.05), report=lines.append, timeout=0.3) == []
    assert lines == [f"{missing} does not exist yet: waiting for a run to save one there (--wait SECONDS to give up)."]
    afile = tmp_path / "afile"
    afile.write_text("")
    assert preview_command.main(["--checkpoint-dir", str(afile)], name="podracer preview") == 2
    assert capsys.readouterr().err.splitlines() == [
        f"podracer preview: error: --checkpoint-dir {str(afile)!r} is a file, not a directory."
    ]
    with pytest.raises(ValueError, match=r"--wait must be >= 0, got -1\.0\."):
        preview.PreviewConfig(str(missing), wait=-1.0)
