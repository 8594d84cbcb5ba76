"""Tests of harness.results.compare and harness.run.abtest on synthetic samples: verdicts for time
(factor and
significance, autocorrelated steps, too few samples, unstable), memory and accuracy; outputs and
exit code; loading stores and exported folders; the A/B alternation and its worktree cleanup."""
from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from harness.contract.cases import Case, CaseExtra
from harness.errors import UsageError
from harness.results.baselines import (
    PASSES,
    BaselinePasses,
    RecordedPasses,
    counting_environment,
    read_passes,
    settings_digest,
    this_machine,
    write_passes,
)
from harness.results.compare import (
    ResultSet,
    Thresholds,
    compare,
    exit_code,
    load_result_set,
    to_json,
    to_markdown,
)
from harness.results.records import CaseResult, EpochRecord, RunRecord
from harness.results.store import ResultsStore
from harness.run import abtest
from harness.run.options import RunOptions
from harness.run.suites import Suite

MEDIAN_STEP_S = 1e-3
DEFAULT_THRESHOLDS = Thresholds()


def steps(rng: np.random.Generator, n: int = 40, scale: float = 1.0, sigma: float = 0.05,
          phi: float = 0.0) -> list[float]:
    """Log-normal step times around `scale` ms; `phi` > 0 AR(1)-correlates consecutive steps."""
    noise = rng.normal(0, sigma * np.sqrt(1 - phi ** 2), n)
    noise[0] = rng.normal(0, sigma)
    for t in range(1, n):
        noise[t] += phi * noise[t - 1]
    return list(scale * MEDIAN_STEP_S * np.exp(noise))


def result(step_times: list[float], model: str = "mlp", seed: int = 0, status: str = "ok",
           alloc_bytes: int = 100_000_000, test_acc: float = 0.90, version: str = "v1",
           suite: str = "ci", contended: bool = False,
           instructions_per_step: float | None = None) -> CaseResult:
    case = Case(suite=suite, model=model, framework="engine-static", dataset="mnist-10k", seed=seed,
                train_limit=4000, extra=CaseExtra(momentum=0.0))
    run = RunRecord(round=0, step_times_s=step_times, warmup_steps=1, warmup_s=0.01,
                    train_time_s=sum(step_times), eval_time_s=0.1, contended=contended)
    return CaseResult(case=case, key=case.key(version, ""), status=status,
                      reason="" if status == "ok" else "boom", provenance={"code_version": version},
                      runs=[run] if step_times else [], alloc_bytes=alloc_bytes, alloc_count=5000,
                      peak_bytes=8_000_000, instructions_per_step=instructions_per_step,
                      epochs=[EpochRecord(1, 0.5, 0.8, 0.4, test_acc, 1.0, 0.1)])


def test_a_result_set_of_fresh_runs_keeps_their_drift_probes() -> None:
    """adh compare --against states the host's steadiness from them."""
    fresh = result([MEDIAN_STEP_S] * 5)
    fresh.runs[0].probe_before_s, fresh.runs[0].probe_after_s = 0.010, 0.012
    runs = ResultSet.from_results([fresh]).runs
    assert runs[["probe_before_s", "probe_after_s"]].values.tolist() == [[0.010, 0.012]]


def sets(base_runs: list[list[float]], new_runs: list[list[float]],
         **new_fields) -> tuple[ResultSet, ResultSet]:
    """BASE and NEW with one mlp case run once per list of step times."""
    return (ResultSet.from_results([result(r) for r in base_runs]),
            ResultSet.from_results([result(r, **new_fields) for r in new_runs]))


def row(rows, metric: str):
    (found,) = [r for r in rows if r.metric == metric]
    return found


def time_verdict(base_scale: float, new_scale: float, seed: int = 0, runs: int = 3, n: int = 40,
                 thresholds: Thresholds = DEFAULT_THRESHOLDS, **noise):
    rng = np.random.default_rng(seed)
    base, new = sets([steps(rng, n, base_scale, **noise) for _ in range(runs)],
                     [steps(rng, n, new_scale, **noise) for _ in range(runs)])
    return row(compare(base, new, thresholds), "step_time_s")


def time_rows_over_seeds(seeds: int = 200, runs: int = 3, n: int = 40,
                         thresholds: Thresholds = DEFAULT_THRESHOLDS, **noise) -> list:
    """Step-time rows of `seeds` cases whose BASE and NEW draw from the same distribution."""
    rng = np.random.default_rng(0)
    base, new = (ResultSet.from_results([result(steps(rng, n, **noise), seed=seed)
                                         for seed in range(seeds) for _ in range(runs)])
                 for _ in "ab")
    return [r for r in compare(base, new, thresholds) if r.metric == "step_time_s"]


def test_clear_slow_down_and_speed_up() -> None:
    slower, faster = time_verdict(1.0, 1.3), time_verdict(1.0, 0.7)
    assert slower.verdict == "regressed" and slower.change == pytest.approx(1.3, rel=0.03)
    assert slower.p_value < 0.01 and "p=" in slower.notes
    assert faster.verdict == "improved" and faster.change == pytest.approx(0.7, rel=0.03)
    assert exit_code([slower]) == 1 and exit_code([faster]) == 0


@pytest.mark.slow
def test_identical_distributions_raise_no_false_alarm() -> None:
    rows = time_rows_over_seeds()
    assert len(rows) == 200 and rows[7].variant == "seed=7"
    assert not [r for r in rows if r.verdict in ("regressed", "improved")]
    # The significance test alone (factor 1): false alarms at about alpha, not more.
    rows = time_rows_over_seeds(thresholds=Thresholds(min_factor=1.0))
    assert sum(r.verdict in ("regressed", "improved") for r in rows) / 200 <= 0.025


@pytest.mark.slow
def test_autocorrelated_steps_are_tested_in_blocks() -> None:
    # Consecutive steps correlate (lag-1 0.4-0.6 measured); counted as independent samples,
    # these identical distributions differ "significantly" in 15 % of pairs at alpha 0.01. Block
    # medians bring that to about alpha (1-2 % over more pairs; 3 % in these 200).
    rows = time_rows_over_seeds(runs=1, n=200, phi=0.5, thresholds=Thresholds(min_factor=1.0))
    assert sum(r.verdict in ("regressed", "improved") for r in rows) / 200 <= 0.04
    assert all(r.n_base < 100 for r in rows)  # blocks, not 200 steps
    assert time_verdict(1.0, 1.3, runs=1, n=200, phi=0.5).verdict == "regressed"


def test_a_significant_change_below_the_factor_is_unchanged() -> None:
    small = time_verdict(1.0, 1.05, n=200, sigma=0.02)
    assert small.p_value < 0.01 and small.verdict == "unchanged"


def test_too_few_samples_give_no_verdict() -> None:
    few = time_verdict(1.0, 1.5, runs=1, n=8)
    assert few.verdict == "~" and "too few samples" in few.notes and few.p_value is None


def test_wide_spread_is_flagged_unstable() -> None:
    wide = time_verdict(1.0, 1.0, sigma=0.5)
    assert "unstable" in wide.notes and wide.spread_base > 0.15
    assert "unstable" not in time_verdict(1.0, 1.0).notes


def test_contended_runs_are_left_out_or_give_no_verdict() -> None:
    rng = np.random.default_rng(0)
    base = ResultSet.from_results([result(steps(rng)) for _ in range(3)]
                                  + [result(steps(rng, scale=2.0), contended=True)])
    new = ResultSet.from_results([result(steps(rng)) for _ in range(3)])
    time = row(compare(base, new), "step_time_s")
    assert time.verdict == "unchanged" and "left out 1 flagged run" in time.notes
    slower = ResultSet.from_results([result(steps(rng, scale=1.3), contended=True)
                                     for _ in range(3)])
    time = row(compare(new, slower), "step_time_s")
    assert time.verdict == "~" and time.p_value < 0.01 and "contended" in time.notes


@pytest.mark.parametrize("factor, verdict",
                         [(1.05, "regressed"), (1.01, "unchanged"), (0.95, "improved")])
def test_memory_has_a_tolerance_and_no_test(factor: float, verdict: str) -> None:
    rng = np.random.default_rng(0)
    base, new = sets([steps(rng)], [steps(rng)], alloc_bytes=int(100_000_000 * factor))
    rows = compare(base, new)
    assert row(rows, "alloc_bytes").verdict == verdict
    assert row(rows, "alloc_bytes").change == pytest.approx(factor)
    assert row(rows, "peak_bytes").verdict == row(rows, "alloc_count").verdict == "unchanged"


@pytest.mark.parametrize("peak, verdict",
                         [(9_000_000, "unchanged"), (8_000_000 + 2 ** 20 + 5_000, "unchanged"),
                          (9_300_000, "regressed"), (6_900_000, "unchanged"),
                          (6_700_000, "improved")])
def test_a_peak_one_allocator_arena_apart_is_unchanged(peak: int, verdict: str) -> None:
    rng = np.random.default_rng(0)
    base = ResultSet.from_results([result(steps(rng))])  # peak_bytes 8,000,000
    new = ResultSet.from_results([replace(result(steps(rng)), peak_bytes=peak)])
    assert row(compare(base, new), "peak_bytes").verdict == verdict


@pytest.mark.parametrize("factor, verdict",
                         [(1.02, "regressed"), (1.005, "unchanged"), (0.98, "improved")])
def test_instructions_have_a_tight_tolerance_and_no_test(factor: float, verdict: str) -> None:
    rng = np.random.default_rng(0)
    base = ResultSet.from_results([result(steps(rng), instructions_per_step=8_000_000)])
    new = ResultSet.from_results([result(steps(rng), instructions_per_step=8_000_000 * factor)])
    rows = compare(base, new)
    counted = row(rows, "instructions_per_step")
    assert counted.verdict == verdict and counted.change == pytest.approx(factor)
    assert exit_code(rows) == (verdict == "regressed")
    assert "instructions/step" in to_markdown(rows)


def test_instructions_counted_on_one_side_only_give_no_verdict() -> None:
    rng = np.random.default_rng(0)
    base = ResultSet.from_results([result(steps(rng))])  # e.g. a commit before the pass existed
    new = ResultSet.from_results([result(steps(rng), instructions_per_step=8_000_000)])
    counted = row(compare(base, new), "instructions_per_step")
    assert counted.verdict == "~" and counted.notes == "not measured in BASE"


@pytest.mark.parametrize("test_acc, verdict",
                         [(0.894, "regressed"), (0.897, "unchanged"), (0.91, "improved")])
def test_accuracy_has_a_tolerance_in_points(test_acc: float, verdict: str) -> None:
    rng = np.random.default_rng(0)
    acc = row(compare(*sets([steps(rng)], [steps(rng)], test_acc=test_acc)), "test_acc")
    assert acc.verdict == verdict and acc.change == pytest.approx(100 * (test_acc - 0.90))


def test_a_case_failing_in_new_fails_the_comparison() -> None:
    rng = np.random.default_rng(0)
    rows = compare(*sets([steps(rng)], [[]], status="crashed"))
    assert [(r.metric, r.verdict) for r in rows] == [("status", "failed")]
    assert "crashed (boom)" in rows[0].notes and exit_code(rows) == 1
    # Fixed in NEW: reported, not failed.
    base, new = sets([[]], [steps(rng)])
    base.cases["status"] = "crashed"
    assert [(r.metric, r.verdict) for r in compare(base, new)] == [("status", "~")]


def test_a_case_unsupported_on_both_sides_is_no_verdict_and_no_failure(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    base, new = sets([[]], [[]], status="unsupported")
    base.cases["status"] = "unsupported"
    rows = compare(base, new)
    assert [(r.metric, r.verdict) for r in rows] == [("status", "n/a")]
    assert "1 unsupported (boom)" in rows[0].notes and exit_code(rows) == 0
    assert "1 n/a" in to_markdown(rows)
    # through an exported folder too: the status survives a CSV round trip
    with ResultsStore(tmp_path / "adh.sqlite") as store:
        store.save(result([], status="unsupported"))
        store.export(tmp_path / "csv")
    assert load_result_set(str(tmp_path / "csv")).cases["status"].tolist() == ["unsupported"]
    # A framework that stopped supporting a case it ran: that case is lost, as if it failed.
    lost = compare(*sets([steps(rng)], [[]], status="unsupported"))
    assert [(r.metric, r.verdict) for r in lost] == [("status", "failed")]


def test_cases_are_matched_by_settings_not_by_key() -> None:
    rng = np.random.default_rng(0)
    base = ResultSet.from_results([result(steps(rng), model="mlp"), result(steps(rng), model="cnn"),
                                   result(steps(rng), model="rnn", seed=1)])
    new = ResultSet.from_results([result(steps(rng), model="cnn", version="v2", suite="renamed"),
                                  result(steps(rng), model="rnn", seed=2)])
    rows = compare(base, new)
    assert {(r.model, r.variant, r.verdict) for r in rows if r.metric == "case"} == {
        ("mlp", "seed=0", "missing"), ("rnn", "seed=1", "missing"), ("rnn", "seed=2", "missing")}
    assert row([r for r in rows if r.model == "cnn"], "step_time_s").verdict == "unchanged"


def test_outputs_and_exit_code() -> None:
    rng = np.random.default_rng(0)
    base, new = sets([steps(rng, scale=1.0) for _ in range(3)],
                     [steps(rng, scale=1.3) for _ in range(3)])
    rows = compare(base, new)
    text = to_markdown(rows, "main", "branch")
    assert "| Model" in text and "| main" in text and "step time" in text and "regressed" in text
    assert f"{rows[0].change:.3f}x" in text and "1 regressed, 4 unchanged" in text
    data = json.loads(to_json(rows))
    assert data["exit_code"] == 1 and len(data["rows"]) == len(rows) == 5
    assert data["rows"][0]["metric"] == "step_time_s" and data["rows"][0]["verdict"] == "regressed"
    assert exit_code([r for r in rows if r.verdict != "regressed"]) == 0


def test_load_result_set_from_a_store_and_an_exported_folder(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    store_path = tmp_path / "adh.sqlite"
    with ResultsStore(store_path) as store:
        store.save(result(steps(rng), version="old1", alloc_bytes=1))
        store.save(result(steps(rng), version="new2"))  # the latest version is taken
        store.save(result(steps(rng), model="cnn", version="new2", suite="quick"))
        store.save(result([], model="rnn", status="interrupted"))  # ignored
        store.export(tmp_path / "csv")
        store.export(tmp_path / "parquet", "parquet")
    for spec in (f"{store_path}#ci", f"{tmp_path / 'csv'}#ci", f"{tmp_path / 'parquet'}#ci"):
        loaded = load_result_set(spec)
        assert loaded.code_versions() == ["new2"]
        assert len(loaded.steps) == 40 and len(loaded.epochs) == 1
        rows = compare(loaded, load_result_set(f"{store_path}#ci"))
        assert {r.verdict for r in rows} == {"unchanged"}
    assert load_result_set(f"{store_path}#ci@old").cases["alloc_bytes"].tolist() == [1]
    assert sorted(load_result_set(str(store_path)).cases["model"]) == ["cnn", "mlp"]
    for bad in (f"{store_path}#paper", str(tmp_path / "none.sqlite"), "git:HEAD"):
        with pytest.raises(UsageError):
            load_result_set(bad)
    assert not (tmp_path / "none.sqlite").exists()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit, as the REF side."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "file.txt").write_text("v1\n")
    for args in (["init", "-q"], ["add", "file.txt"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    return root


def worktrees(repo: Path) -> int:
    out = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True,
                         text=True)
    return len(out.stdout.splitlines())


def fake_round(calls: list, trees: set, repo: Path, scale: dict[str, float] | None = None):
    """A stand-in for runner.measure_round: records (model, side, round, memory measured) and adds
    a run of synthetic steps, `scale[side]` times slower."""
    def measure(result, round_, options, probes, on_progress=None, note=None):
        side = "A" if options.code_dir != str(repo) else "B"
        assert Path(options.code_dir, "file.txt").exists()  # the worktree is there while measuring
        memory = options.memory and result.alloc_bytes is None
        calls.append((result.case.model, side, round_, memory))
        trees.add(Path(options.code_dir))
        rng = np.random.default_rng(len(calls))
        if memory:
            result.alloc_bytes = 1000
        # a host whose pace drifts from round to round by +-20 %: pairing must cancel it
        pace = (1 + 0.2 * (-1) ** round_) * (scale or {}).get(side, 1.0)
        times = steps(rng, scale=pace, sigma=0.01)
        result.runs.append(RunRecord(round=round_, step_times_s=times, warmup_steps=1,
                                     warmup_s=0.01, train_time_s=sum(times), eval_time_s=0.1))
    return measure


def test_ab_test_interleaves_rounds_and_removes_the_worktree(repo: Path, monkeypatch) -> None:
    calls, trees = [], set()
    monkeypatch.setattr(abtest, "measure_round", fake_round(calls, trees, repo))
    cases = [result([], model=m).case for m in ("mlp", "cnn")]
    out = abtest.ab_test("HEAD", Suite("ci", "", cases), rounds=3, repo=repo)
    # every round runs every case, the order rotated; within a round a case's sides run next to
    # each other, REF first in even rounds; memory once per side, in the first round
    assert calls == [("mlp", "A", 0, True), ("mlp", "B", 0, True),
                     ("cnn", "A", 0, True), ("cnn", "B", 0, True),
                     ("cnn", "B", 1, False), ("cnn", "A", 1, False),
                     ("mlp", "B", 1, False), ("mlp", "A", 1, False),
                     ("mlp", "A", 2, False), ("mlp", "B", 2, False),
                     ("cnn", "A", 2, False), ("cnn", "B", 2, False)]
    assert out.base.paired and out.new.paired
    assert len(out.base.cases) == len(out.new.cases) == 2 and len(out.base.runs) == 6
    time = row([r for r in out.rows if r.model == "mlp"], "step_time_s")
    assert time.n_base == 3 and "paired over 3 rounds" in time.notes
    assert time.ci_low < 1 < time.ci_high and time.verdict == "unchanged"
    (ref_tree,) = trees - {repo}
    assert not ref_tree.exists() and worktrees(repo) == 1


def test_ab_test_leaves_out_what_the_suite_leaves_out(repo: Path, monkeypatch) -> None:
    # a suite's not_run case (the optimise suite's cnn/engine-static-unrolled) is measured on
    # neither side, and its rows say n/a with the suite's reason, as adh run's do
    calls, trees = [], set()
    monkeypatch.setattr(abtest, "measure_round", fake_round(calls, trees, repo))
    cases = [result([], model=m).case for m in ("mlp", "cnn")]
    suite = Suite("ci", "", cases, not_run={("cnn", "engine-static"): "same graph as mlp's"})
    out = abtest.ab_test("HEAD", suite, rounds=2, repo=repo)
    assert {model for model, *_ in calls} == {"mlp"}
    (left_out,) = [r for r in out.rows if r.model == "cnn"]
    assert left_out.verdict == "n/a" and "left out" in left_out.notes
    cnn = out.base.cases[out.base.cases["model"] == "cnn"]
    assert list(cnn["status"]) == ["left out"]
    assert list(cnn["reason"]) == ["not run in suite ci: same graph as mlp's"]


def test_ab_test_hands_back_both_sides_cases_for_a_store(repo: Path, tmp_path: Path,
                                                         monkeypatch) -> None:
    # adh compare --against REF --store PATH saves these: each side under its own code version
    (repo / "file.txt").write_text("v2\n")  # the working tree differs from REF
    monkeypatch.setattr(abtest, "measure_round", fake_round([], set(), repo))
    out = abtest.ab_test("HEAD", Suite("ci", "", [result([]).case]), rounds=2, repo=repo)
    base, new = out.results
    assert len(base.runs) == len(new.runs) == 2 and base.key != new.key
    with ResultsStore(tmp_path / "c.sqlite") as store:
        for r in out.results:
            store.save(r)
        assert len(store.cases()) == 2


def test_the_baselines_recorded_passes_are_used_only_where_they_were_measured(
        repo: Path, monkeypatch) -> None:
    calls: list = []
    monkeypatch.setattr(abtest, "measure_round", fake_round(calls, set(), repo))
    case = result([]).case
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    recorded = RecordedPasses(case.label(), 1234, 5, 6, 7, None, 8.0e6, "")
    passes = BaselinePasses(sha, this_machine(), counting_environment(),
                            "2026-11-27T18:00:00+00:00", {settings_digest(case): recorded})
    write_passes(repo / PASSES, passes)
    assert read_passes(repo / PASSES, sha) == passes
    notes: list[str] = []
    options = RunOptions(progress=False, count_instructions=True)
    out = abtest.ab_test("HEAD", Suite("ci", "", [case]), rounds=2, options=options, repo=repo,
                         on_run=notes.append)
    # REF's memory pass is not run again, the working tree's is
    assert calls[:2] == [("mlp", "A", 0, False), ("mlp", "B", 0, True)]
    base, new = out.results
    assert (base.alloc_bytes, base.peak_bytes, base.instructions_per_step) == (1234, 6, 8.0e6)
    assert base.provenance["recorded_passes"] == "adh baseline --set" and new.alloc_bytes == 1000
    assert any("1 of 1 cases as `adh baseline --set` measured them on this machine on "
               "2026-11-27T18:00:00+00:00" in note for note in notes)
    # another commit, or another counting environment (other CPU flags, another numpy): measured
    for other in (replace(passes, commit="0" * 40), replace(passes, environment="elsewhere")):
        write_passes(repo / PASSES, other)
        assert read_passes(repo / PASSES, sha) is None
        calls.clear()
        abtest.ab_test("HEAD", Suite("ci", "", [case]), rounds=1, options=options, repo=repo)
        assert calls == [("mlp", "A", 0, True), ("mlp", "B", 0, True)]
    (repo / PASSES).write_text("{}")
    with pytest.raises(UsageError, match="is not a record of `adh baseline --set`"):
        read_passes(repo / PASSES, sha)


def test_recorded_passes_stay_on_this_machine_and_follow_the_measuring_code(
        repo: Path, tmp_path: Path, monkeypatch) -> None:
    import harness.results.baselines as baselines

    case = result([]).case
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    write_passes(repo / PASSES, BaselinePasses(
        sha, this_machine(), counting_environment(), "2026-11-27T18:00:00+00:00",
        {settings_digest(case): RecordedPasses(case.label(), 1234, 5, 6, 7, None, 8.0e6, "")}))
    # a Slurm node measures both sides of its case: nothing recorded on the login node goes in
    seen: list = []
    fake = fake_round([], set(), repo)

    def on_cluster(pairs, rounds, sides, ref, cluster, on_run):
        seen.extend(pair["base"].alloc_bytes for pair in pairs)
        for pair in pairs:
            for side in ("base", "new"):
                fake(pair[side], 0, sides[side], None)

    monkeypatch.setattr(abtest, "_on_cluster", on_cluster)
    abtest.ab_test("HEAD", Suite("ci", "", [case]), rounds=1, repo=repo,
                   options=RunOptions(progress=False, count_instructions=True),
                   cluster=abtest.ClusterOptions(folder=tmp_path / "cluster"))
    assert seen == [None]
    # the code that launches the passes, or a variable that picks kernels, voids the record
    monkeypatch.setattr(baselines, "REPO_DIR", tmp_path)
    (tmp_path / "harness" / "measure").mkdir(parents=True)
    code = tmp_path / baselines.MEASURING_CODE[1]
    code.write_text("VALGRIND_FLAGS = ['--tool=callgrind']\n")
    before = counting_environment()
    code.write_text("VALGRIND_FLAGS = ['--tool=callgrind', '--cache-sim=yes']\n")
    assert counting_environment() != before
    changed = counting_environment()
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    assert counting_environment() != changed


def test_a_failed_instructions_pass_is_not_recorded(repo: Path, monkeypatch) -> None:
    def passes(result, options):
        result.alloc_bytes = 99
        result.instructions_note = "the instructions pass failed: timeout"

    monkeypatch.setattr(abtest, "deterministic_passes", passes)
    with pytest.raises(UsageError, match="mlp/engine-static/mnist-10k/seed0 at HEAD: the "
                                         "instructions pass failed: timeout; nothing recorded"):
        abtest.measure_passes("HEAD", Suite("ci", "", [result([]).case]), RunOptions(),
                              repo=repo)


def test_adh_baseline_set_measures_the_passes_at_the_commit_in_a_worktree(repo: Path,
                                                                          monkeypatch) -> None:
    trees: list[str] = []

    def passes(result, options):
        trees.append(options.code_dir)
        result.alloc_bytes, result.instructions_per_step = 99, 1.5e6

    monkeypatch.setattr(abtest, "deterministic_passes", passes)
    cases = [result([], model=m).case for m in ("mlp", "cnn")]
    measured = abtest.measure_passes("HEAD", Suite("ci", "", cases), RunOptions(), repo=repo)
    assert len(trees) == 2 and trees[0] != str(repo) and not Path(trees[0]).exists()
    assert measured.machine == this_machine() and measured.environment == counting_environment()
    assert set(measured.cases) == {settings_digest(c) for c in cases}
    assert all(p.alloc_bytes == 99 and p.instructions_per_step == 1.5e6
               for p in measured.cases.values())


def test_ab_test_pairs_rounds_so_that_drift_cancels(repo: Path, monkeypatch) -> None:
    # The host's pace swings +-20 % between rounds, more than the 15 % slowdown: unpaired, the
    # rounds' spread would hide it; paired round by round, the ratio is 1.15 with a tight interval.
    calls, trees = [], set()
    monkeypatch.setattr(abtest, "measure_round", fake_round(calls, trees, repo, scale={"B": 1.15}))
    out = abtest.ab_test("HEAD", Suite("ci", "", [result([]).case]), rounds=4, repo=repo)
    time = row(out.rows, "step_time_s")
    assert time.change == pytest.approx(1.15, rel=0.02)
    assert 1.10 < time.ci_low < time.ci_high < 1.20 and time.verdict == "regressed"
    unpaired_rows = compare(replace(out.base, paired=False), replace(out.new, paired=False))
    unpaired = row(unpaired_rows, "step_time_s")
    assert unpaired.ci_low < 1 and unpaired.verdict == "~"


def test_ab_test_removes_the_worktree_on_ctrl_c_and_refuses_unknown_refs(repo: Path,
                                                                         monkeypatch) -> None:
    seen = []

    def interrupted(result, round_, options, probes, on_progress=None, note=None):
        seen.append(Path(options.code_dir))
        raise KeyboardInterrupt

    monkeypatch.setattr(abtest, "measure_round", interrupted)
    with pytest.raises(KeyboardInterrupt):
        abtest.ab_test("HEAD", Suite("ci", "", [result([]).case]), repo=repo)
    assert not seen[0].exists() and worktrees(repo) == 1
    with pytest.raises(UsageError, match="no commit.*git fetch --unshallow"):
        abtest.ab_test("no-such-ref", Suite("ci", "", []), repo=repo)


def test_one_slow_process_is_not_a_change() -> None:
    # Measured on this machine: the same code in fresh processes ran 5-10 % apart, single runs
    # 25-60 % off. Two slow BASE processes make every BASE block slower, so the block test alone
    # says "improved"; the runs' medians disagree among themselves, so no verdict.
    rng = np.random.default_rng(3)
    base, new = sets([steps(rng, 80, s, sigma=0.02) for s in (1.0, 1.34, 1.30)],
                     [steps(rng, 80, s, sigma=0.02) for s in (1.0, 0.98, 1.02)])
    found = row(compare(base, new), "step_time_s")
    assert found.change < 0.85 and found.p_value < 1e-6  # blocks alone would call it
    assert found.verdict == "~" and "runs p=" in found.notes


def test_a_shift_that_holds_in_every_run_is_flagged() -> None:
    rng = np.random.default_rng(4)
    base, new = sets([steps(rng, 80, s, sigma=0.05) for s in (1.0, 1.03, 0.98)],
                     [steps(rng, 80, 1.2 * s, sigma=0.05) for s in (1.01, 0.97, 1.02)])
    assert row(compare(base, new), "step_time_s").verdict == "regressed"


def test_a_commit_before_the_layers_runs_its_own_worker(tmp_path: Path) -> None:
    """`adh compare --against REF` runs REF's worker from REF's checkout: harness/worker.py in
    a tree that predates harness/run/, this tree's module otherwise."""
    from harness.measure.provenance import REPO_DIR
    from harness.run.processes import worker_module

    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "worker.py").touch()
    assert worker_module(str(tmp_path)) == "harness.worker"
    assert worker_module(str(REPO_DIR)) == worker_module(None) == "harness.run.worker"
    assert abtest.REPO_DIR == REPO_DIR and (REPO_DIR / "harness" / "run").is_dir()


def test_a_baseline_that_did_not_run_is_no_comparison() -> None:
    """A regression check whose BASE crashed must not pass: every verdict would be `~`."""
    import pandas as pd

    from harness.run.abtest import require_base_ran

    cases = pd.DataFrame({"model": ["mlp", "cnn"], "framework": ["engine-static"] * 2,
                          "status": ["ok", "crashed"],
                          "reason": [None, "time pass exit status 1: Traceback\nImportError: x"]})
    with pytest.raises(UsageError, match=r"1 of 2 passes at abc did not finish \(first: "
                                         r"cnn/engine-static crashed: ImportError: x\)"):
        require_base_ran(cases, "abc")
    require_base_ran(cases.iloc[:1], "abc")  # all finished: nothing said
