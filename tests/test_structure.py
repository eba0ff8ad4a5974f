"""The seams of the code base: the layering of ../shared/DESIGN.md, asserted on the source and on what importing a
module loads.

Three layers, each a folder (``podracer/core``, ``podracer/run``, ``podracer/cli``: a module's layer is the second part
of its dotted name), drawn in docs/layout.md: a module of ``core`` loads nothing outside ``core``, a module of ``run``
nothing of ``cli``, asserted on the import closure (a fresh interpreter per module) and on every direct import, at the
top of a module or inside a function; no layer imports a face (``podracer.agents``, ``envs``, ``anakin``,
``sebulba``: the re-export modules over the layers that users import); the feeders know
neither the agent registry nor the config tree; agents never import environments;
environments never import agents, checkpoints or evaluation; no library module imports itself through others; only
the device-layout and multi-process modules touch devices and hosts. No test counts lines.
"""

import ast
import json
import pathlib
import subprocess
import sys


ROOT = pathlib.Path(__file__).resolve().parents[1] / "podracer"
FEEDERS = [ROOT / "run" / "anakin.py", *sorted((ROOT / "run" / "sebulba").glob("*.py"))]


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def test_feeders_import_neither_the_agent_registry_nor_the_config_tree():
    for path in FEEDERS:
        if path.name == "__main__.py":  # the entry point parses the config and calls the composition root
            continue
        imported = set(_imports(ast.parse(path.read_text())))
        registry = {"podracer.agents", "podracer.core.agents", "podracer.core.envs.make", "podracer.envs"}
        bad = imported & (registry | {"podracer.run.config", "podracer.run.compose"})
        assert not bad, (path.name, bad)


def test_only_parallel_and_multihost_place_arrays_and_ask_for_processes():
    calls = (
        "jax.device_put(",
        "jax.process_index(",
        "jax.process_count(",
        "jax.local_devices(",
        "jax.devices(",
        "jax.distributed.",
    )
    for path in sorted(ROOT.rglob("*.py")):
        if path.name not in ("parallel.py", "multihost.py"):
            text = path.read_text()
            assert not [c for c in calls if c in text], path


def test_the_heartbeat_speaks_only_when_no_progress_line_came_for_its_interval():
    import io
    import time

    from podracer.run import lifetime

    quiet, busy = io.StringIO(), io.StringIO()
    with lifetime.Heartbeat(lambda: "compiling", interval=0.2, stream=quiet):
        time.sleep(1.0)
    with lifetime.Heartbeat(lambda: "compiling", interval=0.4, stream=busy) as heartbeat:
        for _ in range(8):
            heartbeat.beat()
            time.sleep(0.1)
    lines = quiet.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.endswith("] | compiling") for line in lines), lines
    assert busy.getvalue() == ""


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in ROOT.rglob("*.py")}


def _library_imports(name: str) -> set[str]:
    """The library modules that module ``name`` imports, at its top or inside a function (a lazy import is still a
    dependency): ``from podracer.X import Y`` counts as ``podracer.X.Y`` where that is a module, else ``podracer.X``."""
    imported = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            candidates = [
                f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in MODULES else node.module
                for alias in node.names
            ]
        else:
            continue
        imported.update(c for c in candidates if c in MODULES and c != name)
    return imported


GRAPH = {name: _library_imports(name) for name in MODULES}


def _under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


# The private modules the library still reads, each with its reason: JAX has no public form of the coordination
# service that keeps a run's coordinator alive apart from process 0 (coordinator.py); multihost.jax_private reads
# the coordinator client and backend state through importlib, which this walk does not see.
PRIVATE_READS = {"run/coordinator.py": {"jax._src.lib", "jax._src.lib._jax"}}


def test_the_library_reads_no_private_module_of_another_package_but_the_listed_ones():
    """The flags are made with argparse, used as documented: no library module imports a private module of another
    package (``tyro._errors`` gave the one-line errors) beyond :data:`PRIVATE_READS`."""
    private = {}
    for path in ROOT.rglob("*.py"):
        where = str(path.relative_to(ROOT))
        names = {
            name
            for name in _imports(ast.parse(path.read_text()))
            if not name.startswith(("podracer", "__future__"))
            and any(part.startswith("_") for part in name.split(".")[1:])
        }
        if names - PRIVATE_READS.get(where, set()):
            private[where] = sorted(names)
    assert not private, private


def test_agents_import_types_networks_and_the_optimizer_never_environments():
    for name, imported in GRAPH.items():
        if _under(name, "podracer.core.agents"):
            bad = {
                m
                for m in imported
                if not _under(
                    m,
                    "podracer.core.agents",
                    "podracer.core.types",
                    "podracer.core.networks",
                    "podracer.core.optim",
                    "podracer.core.replay",
                    "podracer.core.normalize",  # agents.make wraps an agent for --normalize-*
                    "podracer.core.precision",  # the networks in the run's --compute-dtype
                )
            }
            assert not bad, (name, bad)


def test_environments_import_neither_agents_nor_checkpoints_nor_evaluation():
    above = (
        "podracer.core.agents",
        "podracer.core.anakin",
        "podracer.run.checkpoint",
        "podracer.run.evaluate",
        "podracer.run.compose",
        "podracer.run.config",
        "podracer.cli",
        "podracer.run.anakin",
        "podracer.run.sebulba",
        "podracer.core.learner",
        "podracer.run.play",
    )
    for name, imported in GRAPH.items():
        if _under(name, "podracer.core.envs"):
            bad = {m for m in imported if _under(m, *above)}
            assert not bad, (name, bad)


def test_the_lower_layers_stay_below_what_uses_them():
    """types and the optimizer below the agents; statistics below the Anakin feeder and sweeps; playing an agent
    below evaluation and the composition root, which do not import each other's way up."""
    below = {
        "podracer.core.types": set(),
        "podracer.core.optim": {"podracer.core.types"},
        "podracer.core.stats": {"podracer.core.types"},
        "podracer.run.play": {
            "podracer.core.types",
            "podracer.core.envs",
            "podracer.core.envs.base",
            "podracer.core.envs.wrappers",
            "podracer.core.agents.base",
            "podracer.run.parallel",
            "podracer.core.stats",
        },
        "podracer.core.sweep": {
            "podracer.core.agents.hyperparameters",
            "podracer.core.networks",
            "podracer.core.stats",
            "podracer.core.install",
        },
    }
    for name, allowed in below.items():
        assert GRAPH[name] <= allowed, (name, GRAPH[name] - allowed)
    assert "podracer.run.evaluate" not in GRAPH["podracer.run.compose"]  # evaluation builds through the root
    assert not {m for m in GRAPH["podracer.core.sweep"] if _under(m, "podracer.run.anakin", "podracer.core.anakin")}


def test_no_library_module_imports_itself_through_others():
    """No import cycle among the library's modules (Tarjan's strongly connected components of the import graph)."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in GRAPH:
        if name not in index:
            visit(name)
    assert not cycles, cycles


FACES = {
    "podracer",
    "podracer.agents",
    "podracer.envs",
    "podracer.anakin",
    "podracer.sebulba",
    "podracer.sebulba.__main__",
}
_ORDER = {"core": 0, "run": 1, "cli": 2, "face": 3}


def layer(name: str) -> str:
    """A module's layer: the second part of its dotted name (``podracer.core.types``: core); the faces above all."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("core", "run", "cli") else "face"


LAYERED = sorted(name for name in MODULES if layer(name) != "face")


def test_every_library_module_is_in_a_layer_or_is_a_face():
    """``ls podracer`` shows the faces and the three folders: every other module lives in core, run or cli."""
    assert set(MODULES) - set(LAYERED) == FACES, sorted(set(MODULES) - set(LAYERED) - FACES)
    top = sorted(p.name for p in ROOT.iterdir() if not p.name.startswith((".", "__pycache__")))
    assert top == ["__init__.py", "agents.py", "anakin.py", "cli", "core", "envs.py", "py.typed", "run", "sebulba"], top


def test_every_direct_import_stays_in_its_layer_or_below():
    """The edge rule, function-level imports included: core imports only core, run imports no cli, and no layer
    imports a face (the package root, whose ``__init__`` every import loads anyway and which imports nothing, aside)."""
    bad = {}
    for name in LAYERED:
        wrong = sorted(
            m for m in GRAPH[name] if m != "podracer" and (m in FACES or _ORDER[layer(m)] > _ORDER[layer(name)])
        )
        if wrong:
            bad[name] = wrong
    assert not bad, bad


# One process imports the shared third-party libraries, then forks a child for each probe: a fresh interpreter's view
# of what the probe alone loads (the podracer modules in sys.modules whose names start with `prefix`).
_FORKED = r"""
import contextlib, importlib, io, json, os, sys
for library in ("jax", "jax.numpy", "flax.linen", "optax", "chex", "numpy"):  # shared, so each child starts fast
    importlib.import_module(library)
assert not [m for m in sys.modules if m.startswith("podracer")]


def forked(probe, prefix):
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read)
        probe()
        os.write(write, json.dumps(sorted(m for m in sys.modules if m.startswith(prefix))).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.waitpid(child, 0)
    return json.loads(data)
"""

_CLOSURES = (
    _FORKED
    + r"""
closures = {name: forked(lambda: importlib.import_module(name), "podracer.") for name in sys.argv[1:]}
print(json.dumps(closures))
"""
)


def _closures() -> dict[str, list[str]]:
    """Every library module's import closure, the faces' included: the library modules in ``sys.modules`` after
    importing it alone (one process imports the shared third-party libraries, then forks a child per module)."""
    names = [name for name in sorted({*LAYERED, *FACES}) if not name.endswith("__main__")]
    done = subprocess.run(
        [sys.executable, "-c", _CLOSURES, *names], capture_output=True, text=True, check=True, timeout=600
    )
    return json.loads(done.stdout)


_AGENT_MODULES = {
    f"podracer.core.agents.{name}"
    for name in ("a2c", "alphazero", "dqn", "impala", "muzero", "ppo", "pqn", "r2d2", "sac", "td3")
}


def test_no_module_loads_a_module_of_a_higher_layer_and_the_registries_load_no_agent():
    """The layer rule on the import closure, not on direct edges: core loads only core; run loads no cli. The device
    layout module loads no agent and no environment. Naming and listing agents needs none of them imported: each is
    imported when its config is first made. (One test: computing the closures is most of its time.)"""
    closures = _closures()
    above = {}
    for name, loaded in closures.items():
        if name in FACES:
            continue
        higher = sorted(m for m in loaded if _ORDER[layer(m)] > _ORDER[layer(name)])
        if higher:
            above[name] = higher
    assert not above, above
    loaded = set(closures["podracer.run.parallel"])
    assert not {m for m in loaded if _under(m, "podracer.core.agents", "podracer.core.envs")}, sorted(loaded)
    for name in ("podracer.agents", "podracer.core.agents", "podracer.run.config", "podracer.cli.command"):
        assert not _AGENT_MODULES & set(closures[name]), name


_HELP_IMPORTS = (
    _FORKED
    + r"""
def page(argv):
    from podracer.cli import command as cli

    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli.main(argv)
        except SystemExit as done:
            assert done.code == 0, done.code


print(json.dumps([forked(lambda: page(argv), "podracer.core.agents.") for argv in json.loads(sys.argv[1])]))
"""
)


def test_a_help_page_imports_the_agent_it_shows_and_no_other():
    pages = {
        ("anakin", "--help"): "a2c",
        ("anakin", "--agent", "pqn", "--help"): "pqn",
        ("sebulba", "muzero", "--help"): "muzero",
        ("anakin", "--preset", "cartpole", "--help"): "ppo",
    }
    argvs = json.dumps([list(argv) for argv in pages])
    done = subprocess.run([sys.executable, "-c", _HELP_IMPORTS, argvs], capture_output=True, text=True, check=True)
    for (argv, shown), loaded in zip(pages.items(), json.loads(done.stdout), strict=True):
        assert _AGENT_MODULES & set(loaded) == {f"podracer.core.agents.{shown}"}, (argv, loaded)


def _layout_sections() -> dict[str, dict[str, str]]:
    """docs/layout.md's map: for each layer's section (``## core: ...``), its block's lines, path -> concern."""
    import re

    page = (ROOT.parent / "docs" / "layout.md").read_text()
    sections = {}
    for match in re.finditer(r"^## (core|run|cli):[^\n]*\n+```\n(.*?)```", page, re.M | re.S):
        lines = [line.split(None, 1) for line in match.group(2).splitlines() if line.strip()]
        sections[match.group(1)] = {parts[0]: parts[1].strip() if len(parts) > 1 else "" for parts in lines}
    return sections


def test_the_layout_page_names_every_module_of_each_folder_with_its_concern():
    """docs/layout.md draws each folder as it is: every module of ``podracer/core``, ``run`` and ``cli`` on a line of
    its layer's section with what it owns, and no module that is gone."""
    sections = _layout_sections()
    assert set(sections) == {"core", "run", "cli"}, sorted(sections)
    for layer, named in sections.items():
        files = {str(p.relative_to(ROOT / layer)) for p in (ROOT / layer).rglob("*.py")}
        assert set(named) == files, (layer, sorted(files - set(named)), sorted(set(named) - files))
        assert all(len(concern) > 10 for concern in named.values()), (layer, named)
