"""harness.api runs what the `adh` commands run: the same protocol for the same suite."""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

import numpy as np
import pytest

from harness import api
from harness.cli import main
from harness.run.options import RunOptions
from harness.run.suites import builtin_suites, load_suite


class Planned(Exception):
    """Raised where a run would make its plan: the options it was handed are in `options`."""

    def __init__(self, options: RunOptions) -> None:
        super().__init__()
        self.options = options


def _planned_options(monkeypatch: pytest.MonkeyPatch, start) -> RunOptions:
    """The options that `start()` (adh run or api.run) hands to the plan, measuring nothing."""
    def plan(suite, store, options, force):
        raise Planned(options)

    monkeypatch.setattr(api, "make_plan", plan)
    monkeypatch.setattr(api, "calibrate", lambda threads: None)
    monkeypatch.setattr(api, "measurement_lock", lambda **how: nullcontext())
    with pytest.raises(Planned) as planned:
        start()
    return planned.value.options


@pytest.mark.parametrize("name", sorted(builtin_suites()))
def test_api_run_runs_the_protocol_adh_run_runs(name, tmp_path, monkeypatch):
    """For every built-in suite, api.run(NAME) hands the runner the options `adh run NAME`
    hands it (but the command line it records): the suite's rounds, rounds until narrow,
    turns, memory pass and time limit, not RunOptions' defaults."""
    store = tmp_path / "results.sqlite"
    typed = _planned_options(monkeypatch, lambda: main(["run", name, "--store", str(store)]))
    called = _planned_options(monkeypatch, lambda: api.run(name, store))
    assert typed.command == f"adh run {name} --store {store}"
    assert replace(typed, command="") == called
    suite = load_suite(name)
    assert (called.rounds, called.more_rounds, called.turn_steps, called.memory,
            called.timeout_s) == (suite.rounds, suite.more_rounds, suite.turns, suite.memory,
                                  suite.timeout_s)


def test_quick_through_the_api_takes_turns_and_rounds_until_narrow(tmp_path, monkeypatch):
    """The case that went wrong: api.run("quick") ran 1 round, one process at a time."""
    called = _planned_options(monkeypatch, lambda: api.run("quick", tmp_path / "r.sqlite"))
    assert called.rounds == 5 and called.turn_steps == 10
    assert called.more_rounds is not None and called.more_rounds.within == pytest.approx(0.10)


def test_a_keyword_overrides_one_setting_and_keeps_the_rest(tmp_path, monkeypatch):
    called = _planned_options(
        monkeypatch, lambda: api.run("quick", tmp_path / "r.sqlite", progress=False, rounds=2))
    assert (called.progress, called.rounds, called.turn_steps) == (False, 2, 10)
    flags = _planned_options(monkeypatch, lambda: main(
        ["run", "quick", "--store", str(tmp_path / "r.sqlite"), "--no-progress", "--rounds", "2",
         "--no-memory", "--turns", "0", "--timeout", "60"]))
    assert (flags.progress, flags.rounds, flags.memory, flags.turn_steps, flags.timeout_s) == (
        False, 2, False, 0, 60)


def test_run_options_are_immutable():
    options = RunOptions.from_suite(load_suite("quick"))
    with pytest.raises(AttributeError):
        options.rounds = 1  # type: ignore[misc]


@pytest.fixture
def machine_held(holder, monkeypatch):
    """Another measurement holds this machine's lock (tests/test_lock.py's holder)."""
    proc, path = holder
    monkeypatch.setenv("ADH_LOCK_FILE", str(path))
    return proc


def test_a_mistake_in_a_run_is_an_error_before_waiting_for_the_machine(machine_held, tmp_path,
                                                                       capsys):
    """Behind an hour-long run, `adh run --dataset` of a file without x_train, or `adh compare
    --against` a commit that does not exist, says so at once instead of after the wait."""
    mine = tmp_path / "mine.npz"
    np.savez(mine, y_train=np.zeros(3))
    assert main(["run", "quick", "--dataset", str(mine), "--store",
                 str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "x_train" in err and "waiting" not in err, err
    assert main(["compare", "--against", "no-such-ref"]) == 2
    err = capsys.readouterr().err
    assert "'no-such-ref' is no commit of" in err and "waiting" not in err, err
    assert main(["check", "--models", "lenet"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'lenet'" in err and "waiting" not in err, err
    assert machine_held.poll() is None  # it held on all along: nothing waited for it
