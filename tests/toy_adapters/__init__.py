"""Builds tiny installed-looking distributions: `toy_adh`, which registers the toy adapters of
toy_adh.py and toy_conformance.py under the entry point group `autodiff_harness.frameworks`, and
any other a test needs (another version, broken plugins, clashing names); and helpers to put them
on the path of this process and of every process it starts."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from harness.contract.frameworks import ENTRY_POINT_GROUP

HERE = Path(__file__).parent
NAMES = ("toy-ok", "toy-crash", "toy-hang", "toy-nan", "toy-error", "toy-dense")
CLASSES = {"toy-ok": "ToyOk", "toy-crash": "ToyCrash", "toy-hang": "ToyHang", "toy-nan": "ToyNan",
           "toy-error": "ToyError", "toy-dense": "ToyDense"}
# The conformance kit's toys (toy_conformance.py), by name and class.
CONFORMANCE_CLASSES = {"toy-limited": "ToyLimited", "toy-late-outputs": "ToyLateOutputs",
                       "toy-renamed-gradient": "ToyRenamedGradient",
                       "toy-kinked-relu": "ToyKinkedRelu", "toy-keras-adam": "ToyKerasAdam",
                       "toy-unordered-sums": "ToyUnorderedSums"}
ENTRIES = {**{name: f"toy_adh:{cls}" for name, cls in CLASSES.items()},
           **{name: f"toy_conformance:{cls}" for name, cls in CONFORMANCE_CLASSES.items()}}
GEMM_PEAK = 123.0  # the GEMM peak the prepared cache reports (no 2048^3 GEMM measured in tests)
BANDWIDTH = 12.0  # its memory bandwidth in GB/s (no 384 MiB triad either)


def build_distribution(root: Path, name: str = "toy_adh", version: str = "0.0",
                       entries: dict[str, str] | None = None,
                       modules: dict[str, str] | None = None,
                       direct_url: dict | None = None,
                       groups: dict[str, dict[str, str]] | None = None) -> Path:
    """`root` holding the distribution `name` `version`: its `modules` (file name: source; by
    default toy_adh.py and toy_conformance.py) and `name`-`version`.dist-info with METADATA,
    entry_points.txt (`entries`, framework name: "module:Class"; by default the toys of both)
    and, when given, PEP 610's direct_url.json; `groups` adds entry points of other groups
    (group: {name: "module:object"}). An earlier version of it in `root` is replaced."""
    root.mkdir(parents=True, exist_ok=True)
    for old in root.glob(f"{name}-*.dist-info"):
        shutil.rmtree(old)
    if modules is None:
        for module in ("toy_adh.py", "toy_conformance.py"):
            shutil.copy(HERE / module, root / module)
    for file_name, source in (modules or {}).items():
        (root / file_name).write_text(source)
    info = root / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    groups = {ENTRY_POINT_GROUP: ENTRIES if entries is None else entries, **(groups or {})}
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{n} = {target}\n" for n, target in found.items())
        for group, found in groups.items()))
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return root


def write_roofs_cache(cache_dir: Path, threads=(1, 2),
                      peaks: dict[int, float] | None = None) -> Path:
    """A cache of the machine's roofs with this machine's keys, so workers and the runner never
    measure them (a second or two each on a busy machine, where a contended measurement is not
    cached); the GEMM peak at each thread count `peaks` names, else GEMM_PEAK."""
    from harness.measure import roofs

    cache_dir.mkdir(parents=True, exist_ok=True)
    entry = {"measured_at": "2026-01-01T00:00:00+00:00"}
    cache = {**{roofs._gemm_key(t, roofs.GEMM_SIZE): {"value": (peaks or {}).get(t, GEMM_PEAK),
                                                       **entry}
                for t in threads},
             **{roofs._triad_key(t, roofs.TRIAD_ELEMENTS): {"value": BANDWIDTH, **entry}
                for t in threads}}
    (cache_dir / roofs.CACHE_FILE).write_text(json.dumps(cache))
    return cache_dir


def activate(monkeypatch, dist: Path, cache_dir: Path, marker_dir: Path | None = None,
             release: Path | None = None) -> None:
    """Make the distribution visible here (sys.path) and in child processes (PYTHONPATH)."""
    monkeypatch.syspath_prepend(str(dist))
    paths = filter(None, [str(dist), os.environ.get("PYTHONPATH")])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    monkeypatch.setenv("ADH_CACHE_DIR", str(cache_dir))
    if marker_dir is not None:
        marker_dir.mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv("TOY_MARKER_DIR", str(marker_dir))
    if release is not None:
        monkeypatch.setenv("TOY_RELEASE", str(release))


def launches(marker_dir: Path, name: str | None = None) -> int:
    """How many adapters (worker passes) were built, of `name` or of any toy."""
    return sum(1 for p in marker_dir.glob("*.init")
               if name is None or p.name.startswith(name + "."))


def write_suite(folder: Path, name: str, frameworks, **fields) -> Path:
    """A suite file `name`.toml in `folder`: one epoch of the MLP on 500 mnist-10k images (5 steps),
    one thread, one round, no memory pass, unless `fields` say otherwise."""
    fields = {"description": f"toy suite {name}", "dataset": "mnist-10k", "models": ["mlp"],
              "frameworks": list(frameworks), "epochs": 1, "train_limit": 500, "threads": 1,
              "rounds": 1, "memory": False, **fields}
    lines = []
    for key, value in fields.items():
        if isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, (list, str)):
            text = json.dumps(value)
        else:
            text = str(value)
        lines.append(f"{key} = {text}")
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
