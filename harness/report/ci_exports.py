"""Stored results in the formats that continuous-benchmarking services read.

- Bencher Metric Format (`bmf`, https://bencher.dev/docs/reference/bencher-metric-format): one
  JSON object, benchmark name -> measure slug -> {value, lower_value, upper_value}. Step time
  goes to Bencher's built-in `latency` measure, in nanoseconds as that measure is.
- github-action-benchmark's `customSmallerIsBetter` (`github`): a JSON list of {name, unit,
  value, range, extra}. Every entry is smaller-is-better, so accuracy enters as the test error.

Both hold each case's newest results (one commit's), one benchmark per case named
SUITE/MODEL/FRAMEWORK/DATASET/seedN (and the settings that vary in the suite); the machine goes
to `extra` (github) or to Bencher's testbed, which `bencher run --testbed` names.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from harness.errors import UsageError
from harness.report.history import METRICS, case_names, metric_values
from harness.results.machines import case_machines, require_one_machine
from harness.results.records import Status
from harness.results.store import ResultsStore, newest_versions

FORMATS = ("bmf", "github")
# metric -> (Bencher measure slug, its unit's scale from the metric's unit)
BMF_MEASURES = {"step": ("latency", 1e6), "alloc": ("allocated-bytes", 2.0 ** 20),
                "peak": ("peak-memory-bytes", 2.0 ** 20), "accuracy": ("test-accuracy", 1.0)}


def _newest(store: ResultsStore, suite: str | None, allow_mixed_machines: bool,
            ) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    """Per suite: each case's newest version where it finished (one that failed at the newest
    commit is left out, not replaced by an older commit's numbers), with the epochs."""
    stored = store.suites()
    if suite is not None and suite not in stored:
        raise UsageError(f"no results for suite {suite!r} in {store.path}; stored: "
                         f"{', '.join(stored) or 'none'}")
    out = []
    for name in [suite] if suite else stored:
        cases = newest_versions(store.cases(name))
        cases = cases[cases["status"] == Status.OK]
        require_one_machine(cases, f"suite {name!r} in {store.path}", allow_mixed_machines)
        out.append((cases.assign(name=f"{name}/" + case_names(cases)), store.epochs(name)))
    return out


def _finite(x: float) -> bool:
    return x is not None and math.isfinite(x)


def bmf(store: ResultsStore, suite: str | None = None,
        allow_mixed_machines: bool = False) -> dict[str, dict[str, dict[str, float]]]:
    """The newest results of `suite` (default: every suite) in Bencher Metric Format."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for cases, epochs in _newest(store, suite, allow_mixed_machines):
        for metric, (slug, scale) in BMF_MEASURES.items():
            values = metric_values(cases, epochs, metric)
            for (_, case), v in zip(cases.iterrows(), values.itertuples(), strict=True):
                if not _finite(v.value):
                    continue
                entry = {"value": v.value * scale}
                if _finite(v.low) and _finite(v.high):
                    entry |= {"lower_value": v.low * scale, "upper_value": v.high * scale}
                out.setdefault(case["name"], {})[slug] = entry
    return out


def github_benchmark(store: ResultsStore, suite: str | None = None,
                     allow_mixed_machines: bool = False) -> list[dict[str, Any]]:
    """The newest results of `suite` (default: every suite) as github-action-benchmark's
    customSmallerIsBetter list."""
    out = []
    for cases, epochs in _newest(store, suite, allow_mixed_machines):
        machines = case_machines(cases)
        for metric, m in METRICS.items():
            values = metric_values(cases, epochs, metric)
            for (i, case), v in zip(cases.iterrows(), values.itertuples(), strict=True):
                if not _finite(v.value):
                    continue
                value, what = ((v.value, m.name) if m.smaller_is_better
                               else (100.0 - v.value, "test error"))
                entry = {"name": f"{case['name']} {what}", "unit": m.unit,
                         "value": round(value, 6),
                         "extra": f"commit {case.get('prov_code_version', 'unknown')}; "
                                  f"{int(case['runs'])} processes; {machines[i]}"}
                if _finite(v.low) and _finite(v.high):
                    entry["range"] = f"95% CI {v.low:.4g}-{v.high:.4g}"
                out.append(entry)
    return out


def export(store: ResultsStore, out_dir: str | Path, fmt: str, suite: str | None = None,
           allow_mixed_machines: bool = False) -> list[Path]:
    """Write `fmt` (one of FORMATS) to OUT_DIR/bmf.json or OUT_DIR/github-benchmark.json."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if fmt == "bmf":
        path, data = out_dir / "bmf.json", bmf(store, suite, allow_mixed_machines)
    else:
        path = out_dir / "github-benchmark.json"
        data = github_benchmark(store, suite, allow_mixed_machines)  # type: ignore[assignment]
    path.write_text(json.dumps(data, indent=2) + "\n")
    return [path]
