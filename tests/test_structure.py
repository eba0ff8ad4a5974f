"""The seams of the code base: the feeders know neither the agent registry nor the config tree, and stay small."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "podracer"
FEEDERS = [ROOT / "anakin.py", *sorted((ROOT / "sebulba").glob("*.py"))]
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


def test_only_parallel_places_arrays_and_asks_for_processes():
    calls = ("jax.device_put(", "jax.process_index(", "jax.process_count(", "jax.local_devices(", "jax.devices(")
    for path in sorted(ROOT.rglob("*.py")):
        if path.name != "parallel.py":
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
