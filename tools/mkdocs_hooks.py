"""mkdocs hooks (``mkdocs.yml``: ``hooks``): the benchmarks page's generated parts.

- ``<!-- reproduce-table -->`` becomes ``benchmarks/results/reproduce.md`` as ``benchmarks/reproduce.py`` wrote it
  (the same rows, never retyped);
- ``<!-- reproduce-curves -->`` becomes the rows' learning curves, ``benchmarks/results/reproduce_*.png``;
- ``<!-- source-runs -->``, ``<!-- bsuite-scores -->`` and ``<!-- craftax-1m -->`` become
  ``benchmarks/results/source_runs.md`` (the sources' own code run here), ``bsuite.md`` and ``craftax_1m.md``
  (:data:`RESULT_TABLES`);
- every PNG of ``benchmarks/results/`` is served at ``results/NAME.png`` beside the page, so the page can show it;
- the docstrings' Sphinx roles (``:func:`~podracer.run.play.policy```, ``:class:`EnvSpec```), which mkdocstrings prints
  raw, become cross-references: each target is resolved as Python would from the object whose docstring holds it
  (its own members, then its parents', then the package's), with griffe, the loader mkdocstrings itself uses, and
  handed to mkdocs-autorefs as an optional reference (a link where the target is rendered on some page, its name in
  code where it is not). ``~`` shows the last name only, as in Sphinx.
"""

from __future__ import annotations

import functools
import html
import pathlib
import re

from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
RESULT_TABLES = {  # a benchmarks-page placeholder: the results file that replaces it, as its script wrote it
    "<!-- source-runs -->": "source_runs.md",
    "<!-- bsuite-scores -->": "bsuite.md",
    "<!-- craftax-1m -->": "craftax_1m.md",
}
# a Sphinx role as the rendered docstring holds it: :func:<code>~podracer.run.play.policy</code>
ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const):<code>(?P<target>[^<]+)</code>")
ANCHOR = re.compile(r'id="(?P<path>podracer(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"')


def on_files(files, config):
    for picture in sorted(RESULTS.glob("*.png")):
        files.append(
            File(
                f"results/{picture.name}",
                src_dir=str(RESULTS.parent),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


NUMBERS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
# how the agents are named in prose, where not their flag's name in capitals
AGENT_NAMES = {"alphazero": "Gumbel AlphaZero", "muzero": "Gumbel MuZero"}


def registries() -> dict[str, str]:
    """The home page's counts, from the registries (so that they cannot go stale): ``<!-- agents -->`` is the
    built-in agents, ``<!-- suites -->`` the JAX suites with an adapter, each counted and named."""
    from podracer.core import agents, envs

    def counted(names: list[str], what: str) -> str:
        number = NUMBERS[len(names)] if len(names) < len(NUMBERS) else str(len(names))
        return f"{number} {what} ({', '.join(names[:-1])} and {names[-1]})"

    built_in = [AGENT_NAMES.get(name, name.upper()) for name in sorted(agents.BUILT_IN)]
    return {
        "<!-- agents -->": counted(built_in, "agents"),
        "<!-- suites -->": counted(sorted(envs.SUITES), "JAX suites"),
    }


def on_page_markdown(markdown, page, config, files):
    if "<!-- agents -->" in markdown or "<!-- suites -->" in markdown:
        for placeholder, text in registries().items():
            markdown = markdown.replace(placeholder, text)
    if "<!-- reproduce-table -->" in markdown:
        markdown = markdown.replace("<!-- reproduce-table -->", (RESULTS / "reproduce.md").read_text())
    for placeholder, name in RESULT_TABLES.items():
        if placeholder in markdown:
            markdown = markdown.replace(placeholder, (RESULTS / name).read_text())
    if "<!-- reproduce-curves -->" in markdown:
        curves = sorted(RESULTS.glob("reproduce_*.png"))
        shown = "\n".join(f'![{p.stem.removeprefix("reproduce_")}](results/{p.name}){{ width="32%" }}' for p in curves)
        markdown = markdown.replace("<!-- reproduce-curves -->", shown)
    return markdown


@functools.cache
def _package():
    import griffe

    return griffe.load("podracer", search_paths=[str(ROOT)])


def resolve(target: str, scope: str) -> str | None:
    """The full path of the object ``target`` names in the docstring of ``scope`` (a dotted path), following
    aliases to where the object is defined, or None when nothing of that name is found."""
    name = target.lstrip(".")
    parts = scope.split(".")
    candidates = [name] if name.startswith("podracer.") or name == "podracer" else []
    candidates += [".".join([*parts[:i], name]) for i in range(len(parts), 0, -1)]
    package = _package()
    for candidate in candidates:
        if candidate == "podracer":
            return candidate
        try:  # griffe raises its own errors where a path crosses an import of another package (jax ...)
            found = package[candidate.removeprefix("podracer.")]
            return found.final_target.path if found.is_alias else found.path
        except Exception:
            continue
    return None


def roles_to_references(text: str) -> str:
    """Every Sphinx role of a rendered page as an optional autorefs reference (see the module's docstring)."""
    anchors = [(match.start(), match["path"]) for match in ANCHOR.finditer(text)]
    out, at, scope_index, scope = [], 0, 0, "podracer"
    for match in ROLE.finditer(text):
        while scope_index < len(anchors) and anchors[scope_index][0] < match.start():
            scope = anchors[scope_index][1]
            scope_index += 1
        raw = html.unescape(match["target"]).strip()
        short = raw.startswith("~")
        target = raw.lstrip("~")
        shown = html.escape(target.rsplit(".", 1)[-1] if short else target.lstrip("."))
        path = resolve(target, scope)
        replacement = (
            f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>' if path else f"<code>{shown}</code>"
        )
        out += [text[at : match.start()], replacement]
        at = match.end()
    return "".join([*out, text[at:]])


def on_page_content(html_text, page, config, files):
    return roles_to_references(html_text) if ":<code>" in html_text else html_text
