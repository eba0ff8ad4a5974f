"""The accelerator suite (benchmarks/accelerator.py) and its carried wheelhouse (benchmarks/wheelhouse.py): the
suite's rows at toy sizes on the CPU, its budget, its table; the wheels trimmed, filtered and installed offline."""

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import accelerator  # noqa: E402
import wheelhouse  # noqa: E402
from children import older_emitters  # noqa: E402  (tests/children.py)


def _run(*args, timeout=900):
    """The suite in a process of its own, with this process's devices and XLA flags and, in either tier, JAX 0.10's
    older fusion emitters: a smoke run's time is compiling each row's programs (tests/children.py)."""
    env = {**os.environ, "XLA_FLAGS": " ".join([os.environ.get("XLA_FLAGS", ""), *older_emitters()]).strip()}
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / "accelerator.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "accelerator.jsonl").read_text().splitlines()]


def test_a_budget_too_small_for_any_row_runs_none_and_says_so_for_each(tmp_path):
    run = _run("--smoke", "--budget-s", "5", "--out", str(tmp_path))
    assert run.returncode == 0, run.stderr
    header, *rows = _records(tmp_path)
    assert header["header"] and header["device"].endswith("[cpu]") and header["smoke"] and header["budget_s"] == 5
    assert [r["row"] for r in rows] == [row.name for row in accelerator.ROWS]
    for r in rows:
        assert r["note"].startswith("not run: "), r  # too little budget, or a package this environment lacks
    table = (tmp_path / "accelerator.md").read_text()
    assert table.startswith(f"Accelerator suite on {header['device']}, JAX {header['jax']}, podracer ")
    assert table.count("| not run: ") == len(accelerator.ROWS)


def test_bad_input_is_one_line_naming_the_flag(tmp_path):
    run = _run("--budget-s", "0")
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1].endswith("--budget-s must be > 0, got 0.")
    (tmp_path / "x.jsonl").write_text('{"row": "anakin", "what": "w"}\n')
    run = _run("--table", str(tmp_path / "x.jsonl"))
    assert run.returncode == 2 and "no header record (not an accelerator.jsonl)" in run.stderr
    run = _run("--games", "asterix,pong")
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 2 and last.endswith("--games: pong; choose from asterix,breakout,space-invaders,freeway")


def test_the_table_is_rebuilt_from_the_records_a_lent_machine_sent_back(tmp_path):
    header = {"header": True, "device": "NVIDIA H200 x1 [gpu]", "jax": "0.11.2", "commit": "abc", "date": "d"}
    records = [
        header,
        {"row": "anakin", "what": "ppo catch, 4,096 envs", "podracer": 2.5e7, "unit": "env steps/s", "note": "n"},
        {
            "row": "anakin",
            "what": "ppo gymnax CartPole-v1",
            "podracer": 3e7,
            "peer": 2e7,
            "peer_name": "PureJaxRL",
            "ratio": 1.5,
            "unit": "env steps/s",
        },
        {"row": "minatar-ppo", "what": "PPO breakout", "podracer": 61.25, "unit": "s"},
        {"row": "craftax", "what": "c", "note": "not run: needs craftax"},
    ]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    run = _run("--table", str(tmp_path / "a.jsonl"))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Accelerator suite on NVIDIA H200 x1 [gpu], JAX 0.11.2, podracer abc, d"
    assert "| anakin | ppo catch, 4,096 envs [env steps/s] | 25,000,000 | – | – | n |" in lines
    assert "| anakin | ppo gymnax CartPole-v1 [env steps/s] | 30,000,000 | 20,000,000 (PureJaxRL) | 1.50x |  |" in lines
    assert "| minatar-ppo | PPO breakout | 61.2 s | – | – |  |" in lines
    assert "| craftax | c | – | – | – | not run: needs craftax |" in lines


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("envpool-1.2.7.dist-info/RECORD", "stale\n")
    return path


def test_envpool_trimmed_keeps_atari_and_classic_control_and_rewrites_its_record(tmp_path):
    files = {
        "envpool/__init__.py": b"import envpool.entry\n",
        "envpool/entry.py": b"import envpool.atari.registration\nimport envpool.mujoco.gym.registration\n",
        "envpool/registration.py": b"",
        "envpool/python/api.py": b"api",
        "envpool/atari/atari_envpool.so": b"\0" * 100,
        "envpool/classic_control/registration.py": b"",
        "envpool/mujoco/mujoco_gym_envpool.so": b"\0" * 1000,
        "envpool/procgen/procgen_envpool.so": b"\0" * 1000,
        "envpool.libs/libQt6Core.so": b"\0" * 1000,
        "envpool-1.2.7.dist-info/METADATA": b"Name: envpool\n",
    }
    path = _wheel(tmp_path / "envpool-1.2.7-cp312-cp312-manylinux_2_28_x86_64.whl", files)
    wheelhouse.trim_envpool(path)
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        entry = z.read("envpool/entry.py").decode()
        record = z.read("envpool-1.2.7.dist-info/RECORD").decode().splitlines()
        contents = {name: z.read(name) for name in names}
    assert names == {
        "envpool/__init__.py",
        "envpool/entry.py",
        "envpool/registration.py",
        "envpool/python/api.py",
        "envpool/atari/atari_envpool.so",
        "envpool/classic_control/registration.py",
        "envpool-1.2.7.dist-info/METADATA",
        "envpool-1.2.7.dist-info/RECORD",
    }
    assert "import envpool.atari.registration" in entry and "import envpool.classic_control.registration" in entry
    assert "mujoco" not in entry
    assert len(record) == len(names) and record[-1] == "envpool-1.2.7.dist-info/RECORD,,"
    for line in record[:-1]:  # every member's hash and size as pip checks them
        name, digest, size = line.split(",")
        expected = base64.urlsafe_b64encode(hashlib.sha256(contents[name]).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}" and int(size) == len(contents[name])


def test_what_the_lent_machine_has_is_never_carried_and_what_no_row_imports_is_left_with_a_reason():
    resolved = [
        {"name": "rlax", "version": "0.1.9", "url": "u/rlax.whl"},
        {"name": "Flax", "version": "0.12.12", "url": "u/flax.whl"},
        {"name": "opt_einsum", "version": "3.4.0", "url": "u/o.whl"},
        {"name": "pygame", "version": "2.6.1", "url": "u/p.whl"},
        {"name": "envpool-assets", "version": "0.4.1", "url": "u/e.whl"},
    ]
    keep, left = wheelhouse.carried(resolved, wheelhouse.LENT_HAS)
    assert [d["name"] for d in keep] == ["rlax", "envpool-assets"]
    assert left == ["pygame 2.6.1: craftax's interactive play scripts (14 MB)"]


@pytest.mark.slow
def test_smoke_runs_every_row_at_toy_sizes_on_the_cpu(tmp_path):
    carried = tmp_path / "carried"  # nothing carried: no PureJaxRL source, no Pong run to resume
    run = _run("--smoke", "--out", str(tmp_path), "--carried", str(carried))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    header, *rows = _records(tmp_path)
    by_row = {}
    for r in rows:
        assert "failed" not in r.get("note", "") and "cut at" not in r.get("note", ""), r
        if r.get("unit") != "min":  # the row's minutes, checked below
            by_row.setdefault(r["row"], []).append(r)
    available = [row.name for row in accelerator.ROWS if all(_importable(m) for m in row.needs)]
    assert [r["row"] for r in rows if r.get("unit") == "min"] == available  # each row's minutes, in priority order
    assert available[0] == "pong-training" or not _importable("envpool")
    for name in available:
        measured = [r for r in by_row[name] if r.get("podracer") is not None or r.get("peer") is not None]
        assert measured or name == "pong-training", (name, by_row[name])  # 256 Pong steps end no episode
    if _importable("gymnax"):  # PPO in float32 and bfloat16; PureJaxRL's side needs its source, not carried here
        sides = {r["what"].split(", ")[-1]: r["podracer"] for r in by_row["anakin"]}
        assert sides["float32"] > 0 and sides["bfloat16"] > 0, sides
    sizes = by_row["anakin-sizes"]
    assert {r["what"] for r in sizes if r.get("podracer")} == {"a2c catch, 16 envs", "ppo catch, 16 envs"}
    assert all(r["podracer"] > 0 for r in sizes if r.get("podracer"))
    (peer,) = [r for r in by_row["anakin"] if "PureJaxRL" in r["what"]]
    assert peer["note"].startswith("not run: PureJaxRL's source is not carried")
    if "minatar-ppo" in available:
        ppo = by_row["minatar-ppo"][0]
        assert ppo["unit"] == "s" and len(ppo["data"]["per_seed"]) == 2 and ppo["data"]["env_steps"] == 2 * 64 * 128
        # Asterix first, trained with its reproduction row's flags, so that reproduce.py --from-accelerator takes it
        assert ppo["data"]["preset"] == "asterix-minatar" and ppo["data"]["flags"] == {"kernel-init": "lecun"}
    if "sebulba-pong" in available:
        impala, xla, *forms, muzero = by_row["sebulba-pong"]
        assert impala["data"]["agent"] == xla["data"]["agent"] == "impala" and muzero["data"]["agent"] == "muzero"
        assert xla["what"].startswith("IMPALA Pong --envpool-xla: end to end") and xla["podracer"] > 0
        assert [r["data"]["form"] for r in forms] == ["sync", "groups", "async", "xla"]
        assert all(r["podracer"] > 0 and r["ratio"] > 0 for r in forms)
        assert impala["peer"] > 0 and impala["ratio"] == pytest.approx(impala["podracer"] / impala["peer"])
    assert "| anakin-sizes | a2c catch, 16 envs [env steps/s] |" in (tmp_path / "accelerator.md").read_text()
    if "pong-training" in available:  # the run's folder comes back; carried into the next call, the run resumes
        assert "returned as pong_run.tar.gz" in by_row["pong-training"][0]["note"]
        carried.mkdir()
        (tmp_path / "pong_run.tar.gz").rename(carried / "pong_run.tar.gz")
        again = _run("--smoke", "--rows", "pong-training", "--out", str(tmp_path / "again"), "--carried", str(carried))
        assert again.returncode == 0, again.stdout[-3000:]
        (resumed, minutes) = _records(tmp_path / "again")[1:]
        assert minutes["unit"] == "min" and minutes["row"] == "pong-training"
        assert "s of training calls (resumed), exit 0" in resumed["note"], resumed
        assert "has finished: its newest checkpoint" in again.stdout  # podracer found the carried checkpoint


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.slow
def test_the_wheelhouse_installs_with_no_index_and_its_trimmed_envpool_steps_pong(tmp_path):
    dest = tmp_path / "carried"
    made = subprocess.run(
        [sys.executable, str(BENCHMARKS / "wheelhouse.py"), "--here", "--dest", str(dest)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if made.returncode and ("No matching distribution" in made.stderr or "connection" in made.stderr.lower()):
        pytest.skip(f"the package index is not reachable: {made.stderr.strip().splitlines()[-1]}")
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    assert "trimmed to atari, classic_control" in made.stdout and "trimmed to the Atari ROMs" in made.stdout
    assert "(limit 64 MiB)" in made.stdout and (dest / "COMMIT").is_file()
    site = tmp_path / "site"
    wheels = sorted(str(p) for p in (dest / "wheels").glob("*.whl"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(site), *wheels],
        check=True,
        timeout=600,
    )
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import envpool, numpy as np; "
        "assert envpool.__file__.startswith(sys.argv[1]), envpool.__file__; "
        "tasks = {t.split('-')[0] for t in envpool.list_all_envs()}; "
        "assert {'CartPole', 'Pong'} <= tasks and 'HalfCheetah' not in tasks, sorted(tasks); "
        "env = envpool.make_gymnasium('Pong-v5', num_envs=2); obs, _ = env.reset(); "
        "out = env.step(np.zeros(2, np.int32)); print(obs.shape, len(out), len(envpool.list_all_envs()))"
    )
    stepped = subprocess.run([sys.executable, "-c", code, str(site)], capture_output=True, text=True, timeout=300)
    assert stepped.returncode == 0, stepped.stderr[-2000:]
    assert stepped.stdout.startswith("(2, 4, 84, 84) 5 ")
