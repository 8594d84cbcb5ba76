"""History over commits (adh history), its step detection, the CI services' export formats,
the per-machine baseline, and the workflow a user copies."""
from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.cli import main
from harness.cli import parser as _parser
from harness.contract.cases import Case
from harness.measure.provenance import machine_fingerprint
from harness.report.ci_exports import BMF_MEASURES, bmf, github_benchmark
from harness.report.history import METRICS, Point, build_history, change_points, format_history
from harness.results.baselines import read_baselines, set_baseline
from harness.results.records import CaseResult, EpochRecord, RunRecord, Status
from harness.results.store import ResultsStore

REPO = Path(__file__).resolve().parents[1]
MACHINE = machine_fingerprint("Test CPU", 2, "openblas 0.3 Test")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A git repository of five commits; their short shas, oldest first."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    shas = []
    for i in range(5):
        (path / "f.txt").write_text(str(i))
        git(path, "add", "f.txt")
        git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"c{i}")
        shas.append(git(path, "rev-parse", "--short", "HEAD"))
    return path, shas


def result(version: str, step_ms: float, model: str = "cnn", framework: str = "engine-static",
           alloc_mib: float = 100.0, acc: float = 0.9, machine: str = MACHINE) -> CaseResult:
    """A finished case measured at `version`: three processes around `step_ms`."""
    case = Case(suite="ci", model=model, framework=framework, dataset="mnist-10k", seed=0,
                epochs=1)
    runs = [RunRecord(round=r, step_times_s=[step_ms * f / 1e3] * 10, warmup_steps=1,
                      warmup_s=0.01, train_time_s=0.1, eval_time_s=0.01)
            for r, f in enumerate((0.99, 1.0, 1.01))]
    return CaseResult(case=case, key=case.key(version, ""), status=Status.OK,
                      provenance={"code_version": version, "commit": version, "machine": machine,
                                  "numpy": "2.4.6"},
                      runs=runs, alloc_bytes=int(alloc_mib * 2 ** 20), peak_bytes=2 ** 24,
                      epochs=[EpochRecord(1, 0.3, 0.9, 0.3, acc, 0.1, 0.01)])


def test_history_is_in_commit_order_not_in_the_order_measured(repo, tmp_path: Path) -> None:
    path, shas = repo
    with ResultsStore(tmp_path / "h.sqlite") as store:
        for n, i in enumerate((3, 0, 4, 1, 2)):  # a backfill measures old commits last
            store.save(result(shas[i], 10.0 + i), stored_at=f"2026-11-2{n}T00:00:00+00:00")
        history = build_history(store, "ci", "step", repo=path)
    (series,) = history.series
    assert [p.commit.version for p in series.points] == shas
    assert [round(p.value, 6) for p in series.points] == [10.0, 11.0, 12.0, 13.0, 14.0]
    assert all(p.low < p.value < p.high for p in series.points)  # three processes: an interval
    assert [c.subject for c in history.commits] == [f"c{i}" for i in range(5)]


def test_versions_the_repository_lacks_come_last_with_a_note(repo, tmp_path: Path) -> None:
    path, shas = repo
    with ResultsStore(tmp_path / "h.sqlite") as store:
        store.save(result("feedbee", 9.0), stored_at="2026-11-01T00:00:00+00:00")
        store.save(result(shas[1], 10.0))
        store.save(result(shas[1] + "+dirty.0123456789", 10.5))
        store.save(result(shas[0], 11.0))
        history = build_history(store, "ci", "step", repo=path)
    assert [p.commit.label for p in history.series[0].points] == [
        shas[0], shas[1], shas[1] + "+0123456789", "feedbee"]
    assert "feedbee" in history.notes[0] and "not in the repository's history" in history.notes[0]


def test_a_machine_change_starts_another_series_not_a_step(repo, tmp_path: Path) -> None:
    path, shas = repo
    other = machine_fingerprint("Other CPU", 2, "openblas 0.3 Other")
    with ResultsStore(tmp_path / "h.sqlite") as store:
        for i, sha in enumerate(shas):  # CI moved to a machine twice as slow at the fourth commit
            store.save(result(sha, 10.0) if i < 3 else result(sha, 20.0, machine=other))
        history = build_history(store, "ci", "step", repo=path)
    assert {s.machine: len(s.points) for s in history.series} == {MACHINE: 3, other: 2}
    assert all(s.changes == [] for s in history.series)
    text = format_history(history)
    assert f"## {MACHINE}" in text and f"## {other}" in text


def test_records_without_blas_join_the_machine_of_their_cpu(repo, tmp_path: Path) -> None:
    path, shas = repo
    older = machine_fingerprint("Test CPU", 2, None)  # "..., BLAS not recorded"
    with ResultsStore(tmp_path / "h.sqlite") as store:
        for i, sha in enumerate(shas):
            store.save(result(sha, 10.0, machine=older if i < 4 else MACHINE))
        history = build_history(store, "ci", "step", repo=path)
    assert [(s.machine, len(s.points)) for s in history.series] == [(MACHINE, 5)]


def series(values: list[float], spread: float = 0.0) -> list[Point]:
    return [Point(commit_of(i), v, v * (1 - spread), v * (1 + spread))
            for i, v in enumerate(values)]


def commit_of(i: int):
    from harness.report.history import Commit

    return Commit(f"c{i:02d}", i)


def test_a_ten_percent_step_is_found_where_it_is() -> None:
    rng = np.random.default_rng(0)
    values = [10.0 * (1.1 if i >= 12 else 1.0) * (1 + rng.normal(0, 0.01)) for i in range(24)]
    (change,) = change_points(series(values, 0.02), METRICS["step"])
    assert (change.before.version, change.after.version) == ("c11", "c12")
    assert change.ratio == pytest.approx(1.1, abs=0.02)
    assert change.worse and change.regression


def test_flat_noise_gives_no_change_point() -> None:
    for seed in range(5):
        rng = np.random.default_rng(seed)
        values = [10.0 * (1 + rng.normal(0, 0.02)) for _ in range(24)]
        assert change_points(series(values, 0.04), METRICS["step"]) == []


def test_bytes_that_jitter_by_an_arena_have_no_change_point_and_a_real_change_has_one() -> None:
    # deterministic but for Python's 1 MiB arenas: asv alone would call each stray MiB a step
    jitter = [426.7, 427.7, 426.7, 426.7, 427.0, 427.0, 427.7, 427.0, 427.0, 427.0]
    assert change_points(series(jitter), METRICS["alloc"]) == []
    (change,) = change_points(series(jitter + [461.0] * 4), METRICS["alloc"])
    assert (change.before.version, change.after.version) == ("c09", "c10")
    assert change.regression and change.ratio == pytest.approx(461.0 / 427.0, rel=0.005)


def test_accuracy_that_rises_is_better_and_one_that_falls_a_regression() -> None:
    up = change_points(series([80.0] * 8 + [90.0] * 8), METRICS["accuracy"])
    down = change_points(series([90.0] * 8 + [60.0] * 8), METRICS["accuracy"])
    assert [(c.worse, c.regression) for c in up] == [(False, False)]
    assert [(c.worse, c.regression) for c in down] == [(True, True)]
    assert down[0].old == pytest.approx(90.0) and down[0].new == pytest.approx(60.0)


def test_adh_history_prints_tables_and_change_points(repo, tmp_path: Path, capsys) -> None:
    path, shas = repo
    with ResultsStore(tmp_path / "h.sqlite") as store:
        for i, sha in enumerate(shas):
            for fw in ("engine-static", "engine-dynamic"):
                store.save(result(sha, 10.0, framework=fw, alloc_mib=100.0 * (2 if i >= 3 else 1)))
    assert main(["history", "ci", "--store", str(tmp_path / "h.sqlite"), "--repo", str(path),
                 "--metric", "alloc"]) == 0
    out = capsys.readouterr().out
    assert "# ci: bytes allocated in training (MiB), 5 commits" in out
    header = next(line for line in out.splitlines() if line.startswith("| Commit"))
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Commit", "Date", "engine-static", "engine-dynamic"]
    assert f"▲ 2.00x (regression) in {shas[2]}..{shas[3]}: 100.0 -> 200.0 MiB" in out


def test_the_cli_offers_every_metric() -> None:
    (history,) = [a for a in _parser()._subparsers._group_actions[0].choices.items()
                  if a[0] == "history"]
    (metric,) = [a for a in history[1]._actions if a.dest == "metric"]
    assert list(metric.choices) == list(METRICS)


def test_history_errors_name_the_fix(tmp_path: Path, capsys) -> None:
    assert main(["history", "ci", "--store", str(tmp_path / "none.sqlite")]) == 2
    assert "no results at" in capsys.readouterr().err
    with ResultsStore(tmp_path / "h.sqlite") as store:
        store.save(result("abc1234", 10.0))
    assert main(["history", "paper", "--store", str(tmp_path / "h.sqlite")]) == 2
    assert "no results for suite 'paper'" in capsys.readouterr().err


@pytest.fixture
def stored(tmp_path: Path) -> ResultsStore:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        store.save(result("abc1234", 12.0, acc=0.91))
        store.save(result("abc1234", 3.0, model="mlp", acc=0.88))
        yield store


def test_bmf_matches_bencher_metric_format(stored: ResultsStore) -> None:
    data = bmf(stored)
    # Bencher's schema: benchmark name -> measure -> {value (required), lower_value, upper_value},
    # all numbers
    assert set(data) == {f"ci/{m}/engine-static/mnist-10k/seed0" for m in ("cnn", "mlp")}
    for measures in data.values():
        assert set(measures) == {slug for slug, _ in BMF_MEASURES.values()}
        for metric in measures.values():
            assert "value" in metric and set(metric) <= {"value", "lower_value", "upper_value"}
            assert all(isinstance(v, float) for v in metric.values())
    latency = data["ci/cnn/engine-static/mnist-10k/seed0"]["latency"]
    assert latency["value"] == pytest.approx(12.0e6)  # nanoseconds, Bencher's latency unit
    assert latency["lower_value"] < latency["value"] < latency["upper_value"]
    assert data["ci/mlp/engine-static/mnist-10k/seed0"]["test-accuracy"] == {"value": 88.0}
    assert data["ci/mlp/engine-static/mnist-10k/seed0"]["allocated-bytes"] == {
        "value": 100.0 * 2 ** 20}  # bytes, as the measure's name says


def test_github_format_is_a_smaller_is_better_list(stored: ResultsStore) -> None:
    entries = github_benchmark(stored)
    # github-action-benchmark's customSmallerIsBetter: name, unit, value required; range and
    # extra optional strings
    for e in entries:
        assert {"name", "unit", "value"} <= set(e) <= {"name", "unit", "value", "range", "extra"}
        assert isinstance(e["value"], float)
        assert all(isinstance(e[k], str) for k in ("name", "unit", *(set(e) & {"range",
                                                                             "extra"})))
    by_name = {e["name"]: e for e in entries}
    assert len(by_name) == len(entries) == 8
    step = by_name["ci/cnn/engine-static/mnist-10k/seed0 step time"]
    assert step["unit"] == "ms" and step["value"] == pytest.approx(12.0)
    assert step["range"].startswith("95% CI ") and "abc1234" in step["extra"]
    # accuracy enters as the error, so that smaller is better for every entry
    assert by_name["ci/cnn/engine-static/mnist-10k/seed0 test error"]["value"] == pytest.approx(9.0)


def test_adh_results_exports_both_formats(stored: ResultsStore, tmp_path: Path, capsys) -> None:
    for fmt, name in (("bmf", "bmf.json"), ("github", "github-benchmark.json")):
        assert main(["results", "--store", str(stored.path), "--export", str(tmp_path / "out"),
                     "--format", fmt]) == 0
        assert json.loads((tmp_path / "out" / name).read_text())
        assert capsys.readouterr().out.strip().endswith(name)


def test_baseline_per_machine(repo, tmp_path: Path, monkeypatch, capsys) -> None:
    import harness.results.baselines as baselines

    path, shas = repo
    monkeypatch.setattr(baselines, "this_machine", lambda: MACHINE)
    file = path / baselines.BASELINES
    # no entry for this machine: the parent commit
    commit, why = baselines.baseline(path)
    assert commit.startswith(shas[-2]) and "parent commit (HEAD~1)" in why
    # a working tree with changes: its parent is HEAD
    (path / "f.txt").write_text("changed")
    commit, _ = baselines.baseline(path)
    assert commit.startswith(shas[-1])
    with pytest.raises(Exception, match="commit your changes first"):
        set_baseline(path)
    git(path, "checkout", "-q", "f.txt")
    file.parent.mkdir(parents=True)
    file.write_text(f'[baselines]\n"Other CPU" = "{shas[0]}"\n')
    commit, machine, dropped = set_baseline(path)
    assert commit.startswith(shas[-1]) and machine == MACHINE and dropped == 1
    assert read_baselines(file) == {MACHINE: commit}
    git(path, "add", ".")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "baseline")
    commit, why = baselines.baseline(path)  # recorded: not the parent (the baselines commit)
    assert commit.startswith(shas[-1]) and "recorded for this machine" in why


def test_the_committed_baselines_file_reads() -> None:
    table = read_baselines(REPO / "benchmarks" / "ci-baselines.toml")
    assert table and all(len(commit) == 40 for commit in table.values())
    assert all(", BLAS " in machine for machine in table)


def _adh_commands(script: str) -> list[list[str]]:
    """Each `adh ...` command of a workflow step's script, wherever it starts in a line (after
    `&&`, `;`, `$(`, `if`), cut at the first shell operator; GitHub's ${{ ... }} expressions
    replaced by a word first."""
    out = []
    for line in script.splitlines():
        line = re.sub(r"\$\{\{[^}]*\}\}", "EXPR", line).replace("$(", " ").replace(")", " ) ")
        words = shlex.split(line, comments=True)
        starts = [i for i, w in enumerate(words) if w == "adh" or w.endswith("/adh")]
        for start in starts:
            rest = words[start + 1:]
            ops = [i for i, w in enumerate(rest) if w in {">", ">>", "|", "&&", "||", ";", ")"}]
            out.append(rest[:ops[0] if ops else None])
    return out


def test_the_workflow_parses_and_calls_only_commands_that_exist() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "benchmarks.yml").read_text())
    # YAML 1.1 reads the key `on` as True
    events = workflow.get("on", workflow.get(True))
    assert set(events) == {"pull_request", "push"}
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    calls = [argv for s in steps if "run" in s for argv in _adh_commands(s["run"])]
    assert {argv[0] for argv in calls} == {"compare", "publish", "run", "history", "results"}
    parser = _parser()
    for argv in calls:  # argparse exits on an unknown command or option
        args = parser.parse_args(argv)
        if args.command == "compare":  # --against, not also BASE and NEW (stray words)
            assert args.against and args.base is None and args.new is None


def test_the_workflow_test_sees_a_command_anywhere_in_a_line() -> None:
    assert _adh_commands('x=$(adh baseline) && adh compare --against "$x" > out.md') == [
        ["baseline"], ["compare", "--against", "$x"]]
    assert _adh_commands("adh run ${{ matrix.suite }} --rounds 2") == [
        ["run", "EXPR", "--rounds", "2"]]


def test_history_needs_a_store_with_results(tmp_path: Path, capsys) -> None:
    ResultsStore(tmp_path / "empty.sqlite").close()
    assert main(["history", "--store", str(tmp_path / "empty.sqlite")]) == 2
    assert "holds no results yet" in capsys.readouterr().err


def test_a_history_of_one_commit_has_no_change_point(repo, tmp_path: Path) -> None:
    path, shas = repo
    with ResultsStore(tmp_path / "h.sqlite") as store:
        store.save(result(shas[0], 10.0))
        history = build_history(store, "ci", "peak", repo=path)
    (series,) = history.series
    assert len(series.points) == 1 and series.changes == []
    assert series.points[0].value == pytest.approx(16.0)  # MiB; no interval for memory
    assert math.isnan(series.points[0].low)


def test_cases_that_differ_in_a_setting_get_names_that_say_so(tmp_path: Path) -> None:
    with ResultsStore(tmp_path / "r.sqlite") as store:
        for batch in (32, 64):
            r = result("abc1234", 5.0)
            r.case = replace(r.case, batch_size=batch)
            r.key = r.case.key("abc1234", "")
            store.save(r)
        names = set(bmf(store))
        assert names == {f"ci/cnn/engine-static/mnist-10k/seed0/batch_size={b}" for b in (32, 64)}
        assert len({e["name"] for e in github_benchmark(store)}) == 8


def test_exports_of_an_unknown_suite_fail_and_name_the_stored_ones(stored: ResultsStore,
                                                                   tmp_path: Path,
                                                                   capsys) -> None:
    assert main(["results", "--store", str(stored.path), "--suite", "typo", "--export",
                 str(tmp_path / "out"), "--format", "bmf"]) == 2
    err = capsys.readouterr().err
    assert "no results for suite 'typo'" in err and "stored: ci" in err


def test_compare_store_goes_with_against(tmp_path: Path, capsys) -> None:
    assert main(["compare", "a.sqlite", "b.sqlite", "--store", str(tmp_path / "c.sqlite")]) == 2
    assert "--store keeps what is measured: it goes with --against REF" in capsys.readouterr().err


def test_adh_baseline_prints_the_commit(repo, monkeypatch, capsys) -> None:
    import harness.results.baselines as baselines

    path, shas = repo
    monkeypatch.setattr(baselines, "this_machine", lambda: MACHINE)
    monkeypatch.setattr(baselines, "REPO_DIR", path)
    assert main(["baseline"]) == 0
    out, err = capsys.readouterr()
    assert out.strip().startswith(shas[-2]) and "no baseline recorded for this machine" in err
