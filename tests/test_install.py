"""Every install line printed anywhere (the README, the documentation, the library's messages) names a source that
exists and extras that pyproject.toml defines: a checkout (``pip install -e '.[gymnax]'``), a built wheel, a
third-party package, or podracer's distribution on the package index only once a release is there
(``install.RELEASED``)."""

import pathlib
import re
import tomllib

import pytest

import podracer
from podracer.core import envs, install

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
# where a line is printed for a user; the CHANGELOG records what was, and is not read
PLACES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "podracer").rglob("*.py")),
    *sorted((ROOT / "podracer").rglob("*.toml")),
    *sorted((ROOT / "benchmarks").glob("*.py")),
    *sorted((ROOT / "examples").glob("*.py")),
    *sorted((ROOT / "tests").glob("*.py")),
]
# "pip install" and what follows it, up to the end of the code span, the shell command or the line
LINE = re.compile(r"pip install ([^`\n;&#)]*)")


def problems(text: str) -> list[str]:
    """What is wrong with each install line in ``text``: a source that does not exist, or an extra that
    pyproject.toml does not define."""
    found = []
    for match in LINE.finditer(text):
        line = match.group(0).strip()
        targets = re.findall(r"""[^\s'"]+""", match.group(1))
        for i, target in enumerate(targets):
            extras = re.search(r"\[([^\]]*)\]", target)
            named = {e.strip() for e in extras.group(1).split(",")} if extras else set()
            base, path = target.split("[")[0], i > 0 and targets[i - 1] == "-e"  # -e PATH: a checkout
            ours = path or base.endswith(".whl") or base == install.DISTRIBUTION
            if base == "podracer" and not path:
                found.append(f"{line}: 'podracer' on the package index is another project")
            if base == install.DISTRIBUTION and not install.RELEASED:
                found.append(f"{line}: no release of {install.DISTRIBUTION} is on the package index yet")
            if base.endswith(".whl") and not re.search(r"podracer_rl-[^/]*\.whl$", base):
                found.append(f"{line}: a wheel of another name")
            if ours and named - EXTRAS:
                found.append(f"{line}: no extra {', '.join(sorted(named - EXTRAS))} in pyproject.toml")
    return found


def test_the_checker_finds_what_it_is_for():
    assert problems("pip install podracer-rl") == [
        "pip install podracer-rl: no release of podracer-rl is on the package index yet"
    ]
    assert problems("`pip install podracer`") == [
        "pip install podracer: 'podracer' on the package index is another project"
    ]
    assert problems("""pip install -e ".[gymnax,nosuch]" && pytest""") == [
        """pip install -e ".[gymnax,nosuch]": no extra nosuch in pyproject.toml"""
    ]
    assert problems("pip install 'dist/podracer_rl-0.1.0-py3-none-any.whl[video]'; pip install rejax") == []


def test_every_install_line_names_a_source_and_extras_that_exist():
    seen, bad = 0, []
    for path in PLACES:
        if path.name == "test_install.py":
            continue
        text = path.read_text(encoding="utf-8")
        seen += len(LINE.findall(text))
        bad += [f"{path.relative_to(ROOT)}: {problem}" for problem in problems(text)]
    assert seen > 20 and not bad, "\n".join(bad)


def test_every_extra_the_library_names_is_defined():
    """The extras ``install.command`` is asked for in the library's messages, and every suite's (a missing suite
    names its own extra)."""
    asked = {
        extra
        for path in (ROOT / "podracer").rglob("*.py")
        for extra in re.findall(r"install\.command\(['\"]([^'\"]+)['\"]\)", path.read_text(encoding="utf-8"))
    }
    assert {"envpool", "plot", "video", "wandb"} <= asked
    assert not (asked | set(envs.SUITES)) - EXTRAS, (asked | set(envs.SUITES)) - EXTRAS


def test_the_command_says_where_this_copy_came_from(monkeypatch, tmp_path):
    assert install.checkout() == ROOT
    monkeypatch.chdir(ROOT)
    assert install.command("gymnax") == "pip install -e '.[gymnax]'"
    monkeypatch.chdir(tmp_path)
    assert install.command("gymnax", "plot") == f"pip install -e '{ROOT}[gymnax,plot]'"
    # a wheel: the extra's own requirements, as the installed metadata lists them (suites: every suite's)
    monkeypatch.setattr(install, "checkout", lambda: None)
    assert install.command("envpool") == "pip install 'envpool>=1.2.5'"
    suites = install.requirements("suites")
    assert {r.split(">=")[0] for r in suites} >= {"gymnax", "brax", "craftax", "jumanji", "pgx", "navix", "xminigrid"}
    assert install.origin() == (
        "a wheel built from a checkout (pip install podracer_rl-0.1.0-py3-none-any.whl, built there with pip wheel "
        "--no-deps .); not on the package index before the first release"
    ).replace("0.1.0", podracer.__version__)
    monkeypatch.setattr(install, "RELEASED", True)
    assert install.command("gymnax") == "pip install 'podracer-rl[gymnax]'"


def test_without_envpool_sebulba_names_its_extra_and_its_other_routes_still_parse(monkeypatch, capsys):
    """envpool is an extra: its tasks are a one-line error naming it, before anything starts; ``--env list`` says
    they are not installed; ``gymnasium:`` and ``jax:`` environments do not need it."""
    import importlib.util

    from podracer.cli import parser
    from podracer.run.config import SebulbaConfig
    from podracer.cli import catalog
    from podracer.run.hostenvs import envpool as envpool_lib

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "envpool" else real(name, *a))
    envpool_lib._all_task_ids.cache_clear()
    try:
        with pytest.raises(SystemExit) as exit_info:
            parser.parse(SebulbaConfig, ["--env", "Pong"], prog="prog")
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == (
            f"prog: error: --env Pong: envpool's tasks need envpool: {install.command('envpool')} "
            "(--env gymnasium:ID and --env jax:NAME run without it)."
        )
        from podracer.core import envs

        monkeypatch.setattr(envs, "SUITES", {})  # the suites' adapters left out: listing them imports every suite
        assert f"envpool's tasks: not installed ({install.command('envpool')})" in catalog.listing("sebulba")
        assert parser.parse(SebulbaConfig, ["--env", "gymnasium:CartPole-v1"]).env == "gymnasium:CartPole-v1"
        assert parser.parse(SebulbaConfig, ["--env", "jax:catch"]).agent_name == "ppo"
    finally:
        envpool_lib._all_task_ids.cache_clear()


def test_a_gif_without_pillow_is_one_line_naming_the_video_extra(monkeypatch, capsys, tmp_path):
    import importlib.util

    from podracer.cli import evaluate as evaluate_command

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "PIL" else real(name, *a))
    status = evaluate_command.main(
        ["--checkpoint", str(tmp_path), "--gif", str(tmp_path / "play.gif")], name="evaluate"
    )
    assert status == 2
    assert capsys.readouterr().err == f"evaluate: error: --gif needs pillow: {install.command('video')}.\n"
    assert not (tmp_path / "play.gif").exists()
