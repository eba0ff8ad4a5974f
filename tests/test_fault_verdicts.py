"""``tools/faults.py``: the verdicts it gives, the inputs it runs (issue 65's and the earlier lists'), one input run
end to end, and the table it wrote into ``docs/faults.md`` (no traceback, nothing silent)."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def faults():
    spec = importlib.util.spec_from_file_location("faults", ROOT / "tools" / "faults.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["faults"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "kind, status, out, err, expected",
    [
        ("refused", 2, "", "podracer anakin: error: --x must be > 0, got 0.\n", "one line"),
        ("refused", 0, "final training return 0.5 over 12 episodes\n", "", "silent"),
        ("refused", 2, "", "podracer anakin: error: something else\n", "other line"),
        ("refused", 2, "", "podracer anakin: error: --x must be > 0, got 0.\nmore\n", "noisy"),
        ("refused", 1, "", "Traceback (most recent call last):\n  File ...\nValueError: --x must be > 0", "traceback"),
        ("notice", 0, "podracer: --x must be > 0 noted\nfinal\n", "", "notice"),
        ("notice", 0, "final training return 0.5 over 12 episodes\n", "", "silent"),
        ("notice", 2, "", "podracer anakin: error: no\n", "other line"),
    ],
)
def test_each_verdict(faults, kind, status, out, err, expected):
    case = faults.Case(("anakin", "--x", "0"), "--x must be > 0", kind)
    assert faults.verdict(case, status, out, err)[0] == expected


def test_it_runs_issue_65s_inputs_and_every_row_of_the_earlier_tables(faults):
    import test_config
    import test_population

    earlier = faults.earlier()
    assert len(earlier) == len(test_config.BAD_INPUTS) + len(test_population.POPULATION_INPUTS)
    assert {case.argv[0] for case in earlier} == {"anakin", "sebulba", "evaluate", "preview"}
    ours = faults.issue_65()
    assert len(ours) >= 20 and all(case.expect for case in ours)
    assert {case.kind for case in ours} == {"refused", "notice"}
    named = " ".join(case.command for case in ours)
    for flag in ("--population", "--on-nonfinite", "--update-rule", "--baseline-dir", "--policy-std", "--lr-end"):
        assert flag in named
    record = faults.issue_90()  # issue 90's: a fork, a record past its checkpoint, a damaged checkpoint, sizes, presets
    assert all(case.source == "issue 90" and case.expect for case in record)
    named = " ".join(case.command for case in record)
    for flag in ("--resume", "--log-std-init", "--num-simulations", "--preset", "--num-critics", "--total-env-steps"):
        assert flag in named
    assert {case.argv[0] for case in record} == {"anakin", "evaluate", "preview"}
    assert any(case.copies and case.removes for case in record) and any(case.damages for case in record)


def test_an_input_runs_as_its_own_process_to_a_verdict(faults):
    case = faults.Case(("anakin", "--learning-rate", "0"), "--learning-rate must be > 0, got 0.0.")
    said, line, status = faults.run(case, timeout=300)
    assert (said, status) == ("one line", 2) and line == (
        "podracer anakin: error: --learning-rate must be > 0, got 0.0."
    )


def test_the_table_in_the_docs_has_no_traceback_and_nothing_silent():
    text = (ROOT / "docs" / "faults.md").read_text()
    begin, end = text.index("<!-- faults.py: begin -->"), text.index("<!-- faults.py: end -->")
    section = text[begin:end]
    summary = re.search(r"(\d+) inputs, each its own `podracer` process.*?(\d+) tracebacks, (\d+) silent", section)
    assert summary is not None and int(summary.group(1)) >= 140
    assert summary.group(2) == "0" and summary.group(3) == "0"
    rows = [line for line in section.splitlines() if line.startswith("| `podracer ")]
    assert len(rows) == int(summary.group(1))
    assert all(row.split(" | ")[1] in ("one line", "notice") for row in rows)
