"""The documentation keeps up with the code: the reference covers every public module, and each help block in docs/
is the command's real --help (tools/generate_help.py writes them)."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def _public_modules() -> list[str]:
    found = []
    for path in sorted((ROOT / "podracer").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if not any(part.startswith("_") for part in parts[1:]):
            found.append(".".join(parts))
    return found


def test_the_reference_covers_every_public_module_once():
    documented = []
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        documented += re.findall(r"^::: (\S+)$", page.read_text(), re.M)
    modules = _public_modules()
    assert len(modules) > 60  # the walk found the package
    assert sorted(documented) == sorted(set(documented)), "a module documented twice"
    assert set(modules) - set(documented) == set(), "public modules missing from docs/reference/"
    assert set(documented) - set(modules) == set(), "docs/reference/ names modules that are gone"
    nav = (ROOT / "mkdocs.yml").read_text()
    assert all(f"reference/{page.name}" in nav for page in (ROOT / "docs" / "reference").glob("*.md"))


def _generator():
    spec = importlib.util.spec_from_file_location("generate_help", ROOT / "tools" / "generate_help.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["anakin.md", "sebulba.md", "api.md"])
def test_each_help_block_is_the_commands_real_help(page, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    generate = _generator()
    blocks = generate.blocks((ROOT / "docs" / page).read_text())
    assert blocks, f"docs/{page} has no generated help block"
    for command, block in blocks:
        assert block == generate.render(command), f"docs/{page}: {command} differs; run python tools/generate_help.py"
        assert max(map(len, block.splitlines())) <= 101, f"docs/{page}: {command} is wider than the page"


def _hooks():
    pytest.importorskip("mkdocs")  # the docs extra
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "tools" / "mkdocs_hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def test_the_docstrings_sphinx_roles_become_cross_references_resolved_from_where_they_are():
    """mkdocstrings prints Sphinx roles raw; the hook makes each an optional autorefs reference to the object the
    name means where it is written (.ci/run counts the roles left in the built site: none)."""
    hooks = _hooks()
    page = (
        '<h2 id="podracer.run.evaluate">evaluate</h2><p>:func:<code>~podracer.run.play.policy</code> and '
        ":func:<code>play</code>, :class:<code>podracer.envs.EnvSpec</code>, :func:<code>jax.jit</code></p>"
        '<h3 id="podracer.run.hostenvs.gymnasium.GymnasiumEnv.renders">renders</h3>'
        "<p>:meth:<code>render_first</code></p>"
    )
    assert hooks.roles_to_references(page) == (
        '<h2 id="podracer.run.evaluate">evaluate</h2><p>'
        '<autoref identifier="podracer.run.play.policy" optional><code>policy</code></autoref> and '
        '<autoref identifier="podracer.run.evaluate.play" optional><code>play</code></autoref>, '
        '<autoref identifier="podracer.core.types.EnvSpec" optional><code>podracer.envs.EnvSpec</code></autoref>, '
        "<code>jax.jit</code></p>"
        '<h3 id="podracer.run.hostenvs.gymnasium.GymnasiumEnv.renders">renders</h3><p>'
        '<autoref identifier="podracer.run.hostenvs.gymnasium.GymnasiumEnv.render_first" optional>'
        "<code>render_first</code></autoref></p>"
    )


def test_the_home_pages_counts_come_from_the_registries():
    from podracer.core import agents, envs

    hooks = _hooks()
    page = hooks.on_page_markdown((ROOT / "docs" / "index.md").read_text(), None, None, None)
    assert "<!-- agents -->" not in page and "<!-- suites -->" not in page
    assert f"{hooks.NUMBERS[len(agents.BUILT_IN)]} agents (A2C, Gumbel AlphaZero, DQN, IMPALA, Gumbel MuZero" in page
    assert f"{hooks.NUMBERS[len(envs.SUITES)]} JAX suites (brax, bsuite, craftax, gymnax" in page
    assert page.count("and xminigrid)") == 2


def test_the_benchmarks_page_leads_with_the_generated_reproduction_table_and_its_curves():
    hooks = _hooks()
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert page.index("<!-- reproduce-table -->") < page.index("## Throughput")  # first, before the throughput
    shown = hooks.on_page_markdown(page, None, None, None)
    saved = (ROOT / "benchmarks" / "results" / "reproduce.md").read_text()
    assert saved in shown and "(results/reproduce_cartpole.png)" in shown and "<!--" not in shown.split("## Env")[0]


def _shown_import_lines() -> dict[str, str]:
    """Every podracer import line that README, CONTRIBUTING, docs/ and examples/ show (code, code cells and fenced
    blocks alike), by where it stands: ``path:line`` -> the statement (a parenthesised one joined)."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
    pages += [*sorted((ROOT / "examples").rglob("*.py")), *sorted((ROOT / "examples").glob("*.ipynb"))]
    pages += sorted((ROOT / "docs").glob("*.ipynb"))
    shown = {}
    for page in pages:
        if page.suffix == ".ipynb":
            import json

            cells = json.loads(page.read_text())["cells"]
            lines = [
                line for cell in cells if cell["cell_type"] == "code" for line in "".join(cell["source"]).split("\n")
            ]
        else:
            lines = page.read_text().split("\n")
        for number, line in enumerate(lines, 1):
            statement = line.strip().strip("`")
            if not re.match(r"(from podracer(\.\w+)* import |import podracer)", statement):
                continue
            if statement.endswith("("):
                rest = lines[number:]
                statement += " ".join(
                    part.strip() for part in rest[: next(i for i, p in enumerate(rest) if ")" in p) + 1]
                )
            shown[f"{page.relative_to(ROOT)}:{number}"] = statement.split("  #")[0].split(" # ")[0].strip()
    return shown


def test_every_import_line_the_docs_and_examples_show_runs():
    """A reader who copies an import line from the README, the docs or an example gets the module or name it shows,
    in a fresh interpreter (one for them all)."""
    import json
    import subprocess
    import sys

    shown = _shown_import_lines()
    assert len(shown) > 30, shown  # the walk found them
    probe = (
        "import json, sys\nfailed = {}\nfor where, line in json.loads(sys.argv[1]).items():\n"
        "    try:\n        exec(line, {})\n    except Exception as error:\n"
        "        failed[where] = f'{line}: {type(error).__name__}: {error}'\nprint(json.dumps(failed))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(shown)], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}
