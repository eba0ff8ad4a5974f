"""The bad inputs and faults of ``docs/faults.md``, run: every input of issues 65 and 90 and of the earlier lists
(the tables of ``tests/test_config.py`` and ``tests/test_population.py``), each as its own ``podracer`` process, one
at a time, and the verdict on how it ended.

A verdict is one of: ``one line`` (refused: a non-zero exit status and the expected words on one line, nothing
else on stderr), ``notice`` (taken: exit status 0 and the expected one-line notice), ``traceback`` (a Python
traceback reached the user), ``silent`` (exit status 0 where a refusal was due, or no notice where one was),
``other line`` (refused in one line, but not with the expected words) or ``noisy`` (refused, with more than one
line on stderr). The last four are failures: the script exits 1 when any input ends in one.

``python tools/faults.py`` prints the table; ``--only WORDS`` runs the inputs whose command holds them;
``--write`` rewrites the generated part of ``docs/faults.md`` (between its ``<!-- faults.py -->`` markers) with
the verdicts, the machine and the commit. A whole run takes 15-25 minutes on 2 cores (most inputs are refused by
the parser in the 2-4 s of start-up; the faults train a few seconds each, after their setup runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "faults.md"
BEGIN, END = "<!-- faults.py: begin -->", "<!-- faults.py: end -->"
PODRACER = "import sys; from podracer.cli.command import main; sys.argv[0] = 'podracer'; sys.exit(main())"
FAILURES = ("traceback", "silent", "other line", "noisy")
CORRUPT = b"\x80\x04not a pickle"  # a pgx baseline model file that cannot be read
SMALL = ["--num-envs-per-device", "4", "--rollout-length", "4", "--updates-per-call", "10"]


@dataclasses.dataclass(frozen=True)
class Case:
    """One input: ``argv`` of ``podracer`` (``{tmp}`` is the case's own directory), the words ``expect`` of the line
    it must end in, and whether that line is a refusal (``refused``) or a notice of a run that goes on
    (``notice``); ``setup``: ``podracer`` command lines run first, each of which must exit 0; ``files``: files
    written first (path under ``{tmp}`` -> bytes); ``source``: where the input was listed."""

    argv: tuple[str, ...]
    expect: str
    kind: str = "refused"
    setup: tuple[tuple[str, ...], ...] = ()
    files: tuple[tuple[str, bytes], ...] = ()
    source: str = "issue 65"
    copies: tuple[tuple[str, str], ...] = ()  # after the setup: directories under {tmp} copied (source, copy)
    removes: tuple[str, ...] = ()  # then: paths under {tmp} removed (globs)
    damages: tuple[tuple[str, bytes], ...] = ()  # then: files under {tmp} overwritten (a truncated checkpoint)

    @property
    def command(self) -> str:
        return "podracer " + " ".join(self.argv)


def _a(*argv: str) -> tuple[str, ...]:
    return ("anakin", *argv)


def issue_65() -> list[Case]:
    """Every input of issue 65 that its list names, with the line each must now end in."""
    d = "{tmp}/D"
    anakin_40 = _a("--num-updates", "40", "--checkpoint-dir", d, *SMALL)
    sebulba_small = ("--num-envs-per-actor", "4", "--rollout-length", "8")
    return [
        # 1. a population whose lanes diverge: ranked below every finite lane, replaced, never copied
        Case(
            _a("--population", "4", "--pbt-search", "learning_rate=log:1e-4..1e30", "--max-grad-norm", "1e30",
               "--on-nonfinite", "skip", "--num-updates", "200", "--seed", "2"),
            "--on-nonfinite skip: discarding such updates",
            "notice",
        ),
        Case(
            _a("--population", "2", "--pbt-fraction", "0.5", "--pbt-search", "learning_rate=log:1e25..1e30",
               "--max-grad-norm", "1e30", "--on-nonfinite", "skip", "--num-updates", "20", *SMALL),
            "every lane of the population took a non-finite update before the ranking at update 10",
        ),
        # 2. discarded updates counted aloud; more than half: exit status 1
        Case(
            _a("--learning-rate", "1e30", "--max-grad-norm", "1e30", "--on-nonfinite", "skip", "--num-updates", "40",
               *SMALL),
            "more than half of the run's updates were not finite (--on-nonfinite skip)",
        ),
        Case(
            ("sebulba", "--env", "CartPole-v1", "--learning-rate", "1e30", "--max-grad-norm", "1e30",
             "--on-nonfinite", "skip", "--total-env-steps", "2000", *sebulba_small),
            "more than half of the run's updates were not finite (--on-nonfinite skip)",
        ),
        # 3. a resume is checked before it is called finished; both sides' flags compared
        Case(
            ("sebulba", "--env", "CartPole-v1", "--total-env-steps", "2000", "--checkpoint-dir", d, "--resume",
             "auto", *sebulba_small),
            "holds a checkpoint of another run: mode anakin there, sebulba here",
            setup=(anakin_40,),
        ),
        Case(
            _a("--population", "4", "--pbt-search", "learning_rate=log:1e-4..1e-2", "--num-updates", "60",
               "--checkpoint-dir", d, "--resume", "auto", *SMALL),
            "--population none there, 4 here",
            setup=(anakin_40,),
        ),
        Case(
            _a("--update-rule", "rmsprop", "--num-updates", "60", "--checkpoint-dir", d, "--resume", "auto", *SMALL),
            "--update-rule adam there, rmsprop here",
            setup=(anakin_40,),
        ),
        Case(
            _a("--entropy-coef", "0.02", "--num-updates", "60", "--checkpoint-dir", d, "--resume", "auto", *SMALL),
            "podracer: resuming with --entropy-coef 0.02 (was 0.01)",
            "notice",
            setup=(anakin_40,),
        ),
        Case(
            _a("--agent", "muzero", "--unroll-steps", "3", "--num-updates", "20", "--checkpoint-dir", d, "--resume",
               "auto", *SMALL),
            "podracer: resuming with --unroll-steps 3 (was 5)",
            "notice",
            setup=(_a("--agent", "muzero", "--num-updates", "10", "--checkpoint-dir", d, *SMALL),),
        ),
        Case(
            _a("--env", "pgx:tic_tac_toe", "--opponent", "self", "--num-updates", "20", "--checkpoint-dir", d,
               "--resume", "auto", *SMALL),
            "podracer: resuming with --opponent self (was random)",
            "notice",
            setup=(_a("--env", "pgx:tic_tac_toe", "--num-updates", "10", "--checkpoint-dir", d, *SMALL),),
        ),
        Case(
            ("sebulba", "--env", "CartPole-v1", "--total-env-steps", "2000", "--checkpoint-dir", d, "--resume",
             "auto", *sebulba_small),
            "nothing to train",
            "notice",
            setup=(("sebulba", "--env", "CartPole-v1", "--total-env-steps", "2000", "--checkpoint-dir", d,
                    *sebulba_small),),
        ),
        # 4. messages name what the user typed
        Case(
            _a("--population", "2", "--pbt-fraction", "0.5", "--pbt-search", "learning_rate=log:1e25..1e30",
               "--max-grad-norm", "1e30", "--num-updates", "20", *SMALL),
            "(lane 0's)",
        ),
        Case(
            _a("--population", "1000000", "--pbt-search", "learning_rate=log:1e-4..1e-2"),
            "(--population 1,000,000 lanes x ",
        ),
        Case(_a("--num-seeds", "1000000"), "(--num-seeds 1,000,000 x "),
        Case(
            _a("--population", "4", "--pbt-search", "foo=1..2"),
            "choose from learning_rate, max_grad_norm, lr_end, discount, td_lambda, value_coef, entropy_coef.",
        ),
        Case(
            ("evaluate", "--checkpoint", d, "--opponent", "baseline", "--baseline-dir", "{tmp}/B", "--episodes", "2"),
            "is not pgx's baseline model othello_v0",
            setup=(_a("--env", "pgx:othello", "--num-updates", "10", "--checkpoint-dir", d, *SMALL),),
            files=(("B/othello_v0.ckpt", CORRUPT),),
        ),
        Case(_a("--policy-std", "state"), "--policy-std state sets a Gaussian policy's standard deviation"),
        Case(
            ("sebulba", "--env", "CartPole-v1", "--agent", "ppo", "--policy-std", "state"),
            "--policy-std state sets a Gaussian policy's standard deviation",
        ),
        Case(_a("--lr-end", "0.001"), "--lr-end 0.001 has no effect with --lr-schedule constant"),
        Case(_a("--lr-decay-steps", "100"), "--lr-decay-steps 100 has no effect with --lr-schedule constant"),
        # 5. evaluate names a population's kept lane; preview writes beside the run's directory
        Case(
            ("evaluate", "--checkpoint", d, "--episodes", "2"),
            "of the population (the best at its last ranking): learning_rate=",
            "notice",
            setup=(_a("--population", "2", "--pbt-fraction", "0.5", "--pbt-search", "learning_rate=log:1e-3..1e-2",
                      "--num-updates", "20", "--checkpoint-dir", d, *SMALL),),
        ),
        Case(
            ("preview", "--checkpoint-dir", d, "--wait", "0"),
            "D-preview.gif",
            "notice",
            setup=(anakin_40,),
        ),
    ]  # fmt: skip


def _90(*args, **kwargs) -> Case:
    return Case(*args, **kwargs, source="issue 90")


def issue_90() -> list[Case]:
    """The inputs of issue 90 (a run's record belongs to it alone) that a command line can give, with the line each
    must now end in."""
    d, log = "{tmp}/D", "{tmp}/L"
    every_20 = ("--checkpoint-every", "20", *SMALL)
    run_a = _a("--num-updates", "40", "--checkpoint-dir", "{tmp}/ckA", "--log-dir", "{tmp}/logA", *every_20)
    az = _a(
        "--agent",
        "alphazero",
        "--env",
        "pgx:tic_tac_toe",
        "--num-simulations",
        "2",
        "--num-updates",
        "10",
        "--checkpoint-dir",
        d,
        *SMALL,
    )
    binary = b"\x84\x00\xff not text"
    return [
        # 1. a fork never writes into the first run's record; a resume never drops lines past its checkpoint
        _90(
            _a("--num-updates", "60", "--checkpoint-dir", "{tmp}/ckB", "--resume", "auto", *every_20),
            "is a copy, and the record",
            "notice",
            setup=(run_a,),
            copies=(("ckA", "ckB"),),
            removes=("ckB/step_40*", "ckB/finished.json"),
        ),
        _90(
            _a("--num-updates", "60", "--checkpoint-dir", d, "--resume", "auto", "--log-dir", log, *every_20),
            "holds 1 line(s) past step_20",
            setup=(_a("--num-updates", "30", "--checkpoint-dir", d, "--log-dir", log, *every_20),),
            removes=("D/step_30*", "D/finished.json"),
        ),
        # 2. a damaged newest checkpoint: every reader plays the one before and names it
        _90(
            ("evaluate", "--checkpoint", d, "--episodes", "2"),
            "(checkpoint step_20)",
            "notice",
            setup=(_a("--num-updates", "40", "--checkpoint-dir", d, *every_20),),
            damages=(("D/step_40.json", b'{"mode": "ana'),),
        ),
        _90(
            ("preview", "--checkpoint-dir", d, "--wait", "0"),
            "step_20",
            "notice",
            setup=(_a("--num-updates", "40", "--checkpoint-dir", d, *every_20),),
            damages=(("D/step_40.json", b'{"mode": "ana'),),
        ),
        # 4. values and sizes checked where they are parsed, before anything is traced
        _90(_a("--env", "gymnax:Pendulum-v1", "--agent", "ppo", "--log-std-init", "inf"),
             "--log-std-init must be finite and within [-20, 20]"),
        _90(_a("--env", "gymnax:Pendulum-v1", "--agent", "ppo", "--log-std-init", "1000"),
             "--log-std-init must be finite and within [-20, 20]"),
        _90(_a("--agent", "alphazero", "--env", "pgx:tic_tac_toe", "--num-simulations", "100000000",
                "--num-updates", "20"), "the search needs about"),
        _90(("evaluate", "--checkpoint", d, "--episodes", "2", "--num-simulations", "100000000"),
             "the search needs about", setup=(az,)),
        # 6. --preset FILE
        _90(_a("--preset", "{tmp}/p.toml"), "not a UTF-8 text file", files=(("p.toml", binary),)),
        _90(_a("--preset", "{tmp}/p.toml"), "anakn", files=(("p.toml", b'[run]\nmode = "anakn"\n'),)),
        # 7. flags that change nothing
        _90(_a("--total-env-steps", "100", "--num-updates", "40"), "both set the run's length"),
        _90(_a("--env", "gymnax:Pendulum-v1", "--agent", "td3", "--num-critics", "1", "--no-clipped-double-q"),
             "--num-critics 1 has one: drop one of the two flags"),
    ]  # fmt: skip


def earlier() -> list[Case]:
    """The earlier lists: the parser's table of ``tests/test_config.py`` and the population's of
    ``tests/test_population.py`` (read from the tests, so that the two cannot drift)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_config
    import test_population

    commands = {"AnakinConfig": "anakin", "SebulbaConfig": "sebulba", "EvaluateConfig": "evaluate"}
    commands["PreviewConfig"] = "preview"
    cases = [
        Case((commands[cls.__name__], *argv.split()), message, source="tests/test_config.py")
        for cls, argv, message in test_config.BAD_INPUTS
    ]
    cases += [
        Case(_a(*flags.split()), message, source="tests/test_population.py")
        for flags, message in test_population.POPULATION_INPUTS
    ]
    return cases


def verdict(case: Case, status: int, out: str, err: str) -> tuple[str, str]:
    """``(verdict, the line it ended in)`` of ``case`` run to exit ``status`` with ``out`` and ``err``."""
    lines = [line for line in (out + "\n" + err).splitlines() if line.strip()]
    errors = [line for line in err.splitlines() if line.strip()]
    said = [line for line in lines if case.expect in line]
    if "Traceback (most recent call last)" in out + err:
        return "traceback", next((line for line in reversed(errors) if line.strip()), "")
    if case.kind == "notice":
        if status == 0 and said:
            return "notice", said[0]
        return ("silent", lines[-1] if lines else "") if status == 0 else ("other line", (errors or lines or [""])[-1])
    if status == 0:
        return "silent", lines[-1] if lines else ""
    if len(errors) > 1:
        return "noisy", errors[0]
    if not said:
        return "other line", (errors or lines or [""])[-1]
    return "one line", said[0]


def run(case: Case, timeout: float) -> tuple[str, str, int]:
    """``(verdict, line, exit status)`` of ``case``, run in a fresh directory after its setup."""
    with tempfile.TemporaryDirectory(prefix="podracer-faults-") as tmp:
        for path, data in case.files:
            target = pathlib.Path(tmp) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        env.update(PYTHONUNBUFFERED="1", COLUMNS="200")
        for argv in case.setup:
            done = _podracer(argv, tmp, env, timeout)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or [""])[-1]
                return "other line", f"setup {' '.join(argv)} ended {done.returncode}: {last}", done.returncode
        here = pathlib.Path(tmp)
        for source, copy in case.copies:
            shutil.copytree(here / source, here / copy)
        for pattern in case.removes:
            for path in here.glob(pattern):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        for path, data in case.damages:
            (here / path).write_bytes(data)
        done = _podracer(case.argv, tmp, env, timeout)
        said, line = verdict(case, done.returncode, done.stdout, done.stderr)
        return said, line.replace(tmp, "TMP"), done.returncode


def _podracer(argv, tmp: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
    args = [a.replace("{tmp}", tmp) for a in argv]
    try:
        return subprocess.run(
            [sys.executable, "-c", PODRACER, *args],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as error:
        out = error.stdout.decode() if isinstance(error.stdout, bytes) else error.stdout or ""
        return subprocess.CompletedProcess(args, 124, out, f"(no end within {timeout:.0f} s)")


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model} ({os.cpu_count()} cores)"


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def table(rows: list[tuple[Case, str, str, int]]) -> str:
    """The Markdown of the generated section: a summary, then issue 65's inputs and the earlier lists'."""
    counts = {name: sum(1 for _, v, _, _ in rows if v == name) for name in ("one line", "notice", *FAILURES)}
    head = (
        f"{len(rows)} inputs, each its own `podracer` process, one at a time (`python tools/faults.py --write`; "
        f"{machine()}, commit {commit()}, {time.strftime('%Y-%m-%d')}): {counts['one line']} refused in one line, "
        f"{counts['notice']} taken with a one-line notice; {counts['traceback']} tracebacks, {counts['silent']} "
        f"silent, {counts['other line']} other lines, {counts['noisy']} noisy."
    )
    out = [head, ""]
    sections = (("Issue 65's inputs", ("issue 65",)), ("Issue 90's inputs", ("issue 90",)))
    sections += (("The earlier lists", ("tests/test_config.py", "tests/test_population.py")),)
    for title, sources in sections:
        out += [f"#### {title}", "", "| input | verdict | exit | the line it ended in |", "|---|---|---:|---|"]
        for case, said, line, status in rows:
            if case.source in sources:
                shown, command = line.replace("|", "\\|"), case.command.replace("|", "\\|")
                out.append(f"| `{command}` | {said} | {status} | {shown} |")
        out.append("")
    return "\n".join(out)


def write(section: str) -> None:
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOCS}: no {BEGIN} ... {END} markers to write between.")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOCS.write_text(text[:start] + "\n" + section + "\n" + text[end:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run only the inputs whose command holds these words")
    parser.add_argument("--write", action="store_true", help="rewrite the generated part of docs/faults.md")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds each process may take")
    args = parser.parse_args(argv)
    cases = issue_65() + issue_90() + earlier()
    if args.only:
        cases = [c for c in cases if args.only in c.command]
    rows = []
    for i, case in enumerate(cases, 1):
        said, line, status = run(case, args.timeout)
        rows.append((case, said, line, status))
        print(f"[{i}/{len(cases)}] {said:10s} {status:3d}  {case.command}\n{'':17s}{line[:200]}", flush=True)
    section = table(rows)
    print("\n" + section.splitlines()[0])
    if args.write:
        write(section)
        print(f"wrote {DOCS.relative_to(ROOT)}")
    return 1 if any(said in FAILURES for _, said, _, _ in rows) else 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["Case", "earlier", "issue_65", "issue_90", "main", "run", "table", "verdict"]
