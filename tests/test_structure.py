"""The seams of the code base: the layering of ../shared/DESIGN.md, asserted on the source and on what importing a
module loads.

Three layers (:data:`LAYERS`, drawn in docs/layout.md): a module of ``core`` loads nothing outside ``core``, a module
of ``run`` nothing of ``cli``, asserted on the import closure (a fresh interpreter per module); the feeders know
neither the agent registry nor the config tree; agents never import environments;
environments never import agents, checkpoints or evaluation; no library module imports itself through others; only
the device-layout and multi-process modules touch devices and hosts. No test counts lines.
"""

import ast
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "podracer"
FEEDERS = [*sorted((ROOT / "anakin").glob("*.py")), *sorted((ROOT / "sebulba").glob("*.py"))]


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
        bad = imported & {"podracer.agents", "podracer.config", "podracer.experiment", "podracer.envs.make"}
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

    from podracer import lifetime

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
PRIVATE_READS = {"coordinator.py": {"jax._src.lib", "jax._src.lib._jax"}}


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
        if _under(name, "podracer.agents"):
            bad = {
                m
                for m in imported
                if not _under(
                    m,
                    "podracer.agents",
                    "podracer.types",
                    "podracer.networks",
                    "podracer.optim",
                    "podracer.replay",
                    "podracer.normalize",  # agents.make wraps an agent for --normalize-*
                )
            }
            assert not bad, (name, bad)


def test_environments_import_neither_agents_nor_checkpoints_nor_evaluation():
    above = (
        "podracer.agents",
        "podracer.checkpoint",
        "podracer.evaluate",
        "podracer.experiment",
        "podracer.config",
        "podracer.cli",
        "podracer.anakin",
        "podracer.sebulba",
        "podracer.learner",
        "podracer.play",
    )
    for name, imported in GRAPH.items():
        if _under(name, "podracer.envs"):
            bad = {m for m in imported if _under(m, *above)}
            assert not bad, (name, bad)


def test_the_lower_layers_stay_below_what_uses_them():
    """types and the optimizer below the agents; statistics below the Anakin feeder and sweeps; playing an agent
    below evaluation and the composition root, which do not import each other's way up."""
    below = {
        "podracer.types": set(),
        "podracer.optim": {"podracer.types"},
        "podracer.stats": {"podracer.types"},
        "podracer.play": {
            "podracer.types",
            "podracer.envs",
            "podracer.envs.base",
            "podracer.envs.wrappers",
            "podracer.agents.base",
            "podracer.parallel",
            "podracer.stats",
        },
        "podracer.sweep": {"podracer.agents.base", "podracer.stats", "podracer.install"},
    }
    for name, allowed in below.items():
        assert GRAPH[name] <= allowed, (name, GRAPH[name] - allowed)
    assert "podracer.evaluate" not in GRAPH["podracer.experiment"]
    assert "podracer.experiment" not in GRAPH["podracer.evaluate"]  # both build agents through podracer.build
    assert "podracer.anakin" not in GRAPH["podracer.sweep"]


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


# Each library module's layer (docs/layout.md). core: pure functions of arrays (types, networks, agents, losses,
# optimizers, replay, the learner step, axis names and collectives, sweeps and populations, JAX environments and
# their suite adapters). run: the host side of a run (device layout, processes, host environments, checkpoints,
# logging, lifetime, the feeders' host loops, playing and evaluation). cli: the config tree and the command line,
# with, for now, the modules that read the config tree (the composition root, evaluate's and preview's entries).
_CORE = """install types axes initializers networks optim replay learner stats normalize sweep pbt
agents agents.a2c agents.alphazero agents.base agents.dqn agents.impala agents.losses agents.muzero agents.ppo
agents.pqn agents.qlearning agents.r2d2 agents.sac agents.search agents.settings agents.td3
envs envs.base envs.wrappers envs.cartpole envs.catch envs.memory envs.synthetic
envs.brax envs.bsuite envs.craftax envs.gymnax envs.jumanji envs.navix envs.pgx envs.playground envs.xminigrid"""
_RUN = """disk coordinator multihost parallel plan checkpoint resume_identity runlock lifetime logging startup
compile_cache runkit preflight play ladder anakin anakin.core anakin.loop anakin.population
sebulba sebulba.actor sebulba.assemble sebulba.learner_loop sebulba.pipeline sebulba.run
envs.host envs.envpool envs.gymnasium video"""
_CLI = """config flags command_line helptext cli presets envs.catalog build record experiment evaluate preview facade
    sebulba.__main__"""
LAYERS = {
    f"podracer.{name}": layer
    for layer, names in (("core", _CORE), ("run", _RUN), ("cli", _CLI))
    for name in names.split()
}
_ORDER = {"core": 0, "run": 1, "cli": 2, "unplaced": 3}  # a module not in LAYERS counts as above every layer


def test_every_library_module_has_one_layer():
    """A new module is placed in a layer here (and in docs/layout.md) when it is added; ``podracer`` itself is the
    lazy public face, in none."""
    assert set(MODULES) - {"podracer"} == set(LAYERS), (
        sorted(set(MODULES) - {"podracer"} - set(LAYERS)),
        sorted(set(LAYERS) - set(MODULES)),
    )


_CLOSURES = r"""
import importlib, json, os, sys
for library in ("jax", "jax.numpy", "flax.linen", "optax", "chex", "numpy"):  # shared, so each child starts fast
    importlib.import_module(library)
assert not [m for m in sys.modules if m.startswith("podracer")]
closures = {}
for name in sys.argv[1:]:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # a fresh interpreter's view: only what importing `name` loads
        os.close(read)
        importlib.import_module(name)
        os.write(write, json.dumps(sorted(m for m in sys.modules if m.startswith("podracer."))).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.waitpid(child, 0)
    closures[name] = json.loads(data)
print(json.dumps(closures))
"""


def _closures() -> dict[str, list[str]]:
    """Every library module's import closure: the library modules in ``sys.modules`` after importing it alone
    (one process imports the shared third-party libraries, then forks a child per module)."""
    names = sorted(name for name in LAYERS if name != "podracer.sebulba.__main__")
    done = subprocess.run(
        [sys.executable, "-c", _CLOSURES, *names], capture_output=True, text=True, check=True, timeout=600
    )
    return json.loads(done.stdout)


def test_no_module_loads_a_module_of_a_higher_layer():
    """The layer rule on the import closure, not on direct edges: core loads only core; run loads no cli."""
    above = {}
    for name, loaded in _closures().items():
        higher = sorted(m for m in loaded if _ORDER[LAYERS.get(m, "unplaced")] > _ORDER[LAYERS[name]])
        if higher:
            above[f"{name} ({LAYERS[name]})"] = higher
    assert not above, above


def test_the_device_layout_module_loads_no_agent_and_no_environment():
    loaded = set(_closures_of("podracer.parallel"))
    assert not {m for m in loaded if _under(m, "podracer.agents", "podracer.envs")}, sorted(loaded)


def _closures_of(name: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _CLOSURES, name], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)[name]


_AGENT_MODULES = {f"podracer.agents.{name}" for name in ("a2c", "alphazero", "dqn", "impala", "muzero", "ppo", "pqn")}
_AGENT_MODULES |= {"podracer.agents.r2d2", "podracer.agents.sac", "podracer.agents.td3"}


def test_the_agent_registry_and_the_config_tree_load_no_agent_module():
    """Naming and listing agents needs none of them imported: each is imported when its config is first made."""
    for name in ("podracer.agents", "podracer.config", "podracer.cli"):
        assert not _AGENT_MODULES & set(_closures_of(name)), name


_HELP_IMPORTS = r"""
import contextlib, io, json, sys
from podracer import cli
with contextlib.redirect_stdout(io.StringIO()):
    try:
        cli.main(sys.argv[1:])
    except SystemExit as done:
        assert done.code == 0, done.code
print(json.dumps(sorted(m for m in sys.modules if m.startswith("podracer.agents."))))
"""


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["anakin", "--help"], "a2c"),
        (["anakin", "--agent", "pqn", "--help"], "pqn"),
        (["sebulba", "muzero", "--help"], "muzero"),
        (["anakin", "--preset", "cartpole", "--help"], "ppo"),
    ],
)
def test_a_help_page_imports_the_agent_it_shows_and_no_other(argv, shown):
    done = subprocess.run([sys.executable, "-c", _HELP_IMPORTS, *argv], capture_output=True, text=True, check=True)
    assert _AGENT_MODULES & set(json.loads(done.stdout)) == {f"podracer.agents.{shown}"}, done.stdout
