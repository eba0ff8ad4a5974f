"""The seams of the code base: the layering of ../shared/DESIGN.md, asserted on the source.

The feeders know neither the agent registry nor the config tree, and stay small; agents never import environments;
environments never import agents, checkpoints or evaluation; no library module imports itself through others; only
the device-layout and multi-process modules touch devices and hosts.
"""

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "podracer"
FEEDERS = [*sorted((ROOT / "anakin").glob("*.py")), *sorted((ROOT / "sebulba").glob("*.py"))]
MAX_LINES = 60  # per function, its docstring not counted


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


def test_no_feeder_function_is_longer_than_sixty_lines():
    for path in FEEDERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            lines = node.end_lineno - node.lineno + 1
            doc = node.body[0]
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str):
                lines -= doc.end_lineno - doc.lineno + 1
            assert lines <= MAX_LINES, (path.name, node.name, lines)


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


def test_agents_import_types_networks_and_the_optimizer_never_environments():
    for name, imported in GRAPH.items():
        if _under(name, "podracer.agents"):
            bad = {
                m
                for m in imported
                if not _under(
                    m, "podracer.agents", "podracer.types", "podracer.networks", "podracer.optim", "podracer.replay"
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
        "podracer.sweep": {"podracer.agents.base", "podracer.stats"},
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


def test_no_library_module_is_longer_than_450_lines():
    """Each concern one room: a module past 450 lines (as ruff formats it) holds more than one."""
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 450}
    assert not long, long


def test_the_composition_root_keeps_to_two_short_programs():
    """experiment.py holds train_anakin and train_sebulba; the builders it shares live in build.py."""
    assert len((ROOT / "experiment.py").read_text().splitlines()) <= 300
