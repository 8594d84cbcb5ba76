"""The plan of a run: every case checked before anything is measured, and how long it will take.

`make_plan` looks at every case of a suite without training anything: the store can be written,
the framework is installed and loads (asked in a child process: harness.run.probe), the
dataset is present and fits the model (features per example, label range, at least one full
batch), the threads do not exceed the CPUs this process may use, and the estimated peak memory
fits in what the machine has free. Each problem is one line that names the cases and the fix;
problems that many cases share come once. A case whose framework does not support it is no
problem: it is planned as n/a, as the run would record it.

Some settings do not stop a run but make its numbers meaningless: more threads than usable CPUs
(the contention is measured, not the framework), a training set smaller than one batch (nothing
would train), fewer than two training steps (the first is warm-up: nothing is timed), more memory
than is free (swapping is measured). They are refused unless forced: a forced case trains with
what can run (one batch of the whole training set), and its records say what was forced.

The estimate of each case comes from the store's history of the same case (the newest stored run
of the same settings: the wall time of its passes, scaled to this case's epochs), else from a
rough model: FLOPs per step at a share of this machine's measured GEMM peak, plus each process's
start-up. A plan measures nothing and writes nothing (it reads the store read-only).
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING

import numpy as np

from harness.contract.cases import Case, dataset_file
from harness.contract.data import load_dataset
from harness.contract.flops import train_step_flops
from harness.contract.frameworks import ENGINES, not_installed
from harness.contract.prepared import case_spec, case_split
from harness.errors import DatasetError, StoreError
from harness.measure.roofs import cached_gemm_peak_gflops
from harness.measure.threads import usable_cpus
from harness.results.records import Status
from harness.results.store import ResultsStore
from harness.run.options import RunOptions
from harness.run.probe import probe
from harness.run.runner import case_keys, resume_skips
from harness.run.suites import Suite

if TYPE_CHECKING:
    from harness.contract.data.dataset import Dataset

MIB = 1024**2
# The rough model, for cases the store has no history of. The engine and torch reach about this
# share of the GEMM peak on the built-in models' training steps here (2 cores: 5-20 %).
ROUGH_PEAK_SHARE = 0.1
ROUGH_PEAK_GFLOPS = 100.0  # a GEMM peak where none was measured on this machine yet
ROUGH_STARTUP_S = dict.fromkeys(ENGINES, 2.0)  # a fresh process, to its 1st step
ROUGH_STARTUP_DEFAULT_S = 5.0  # torch, jax and plugins import more
ROUGH_MEMORY_PASS_FACTOR = 2.0  # memray slows training about this much
ROUGH_INSTRUCTIONS_PASS_S = 40.0  # valgrind: 12-80 s per case of the built-in suites here
ROUGH_BASE_RSS = dict.fromkeys(ENGINES, 150 * MIB)  # interpreter, numpy
ROUGH_BASE_RSS_DEFAULT = 600 * MIB  # torch, jax and plugins
ACTIVATION_COPIES = 4  # each layer output: value, gradient, and temporaries of its backward


@dataclass
class PlannedCase:
    """One case of the plan: what it is, whether it runs, and about how long it takes."""

    case: Case
    key: str
    name: str  # how the plan names it: its label and what tells it apart from its neighbours
    skipped: bool = False  # finished in the store for the same code (--resume)
    unsupported: str | None = None  # the framework's reason: the run records it as n/a
    estimate_s: float = 0.0  # the passes still to run, start to end
    from_history: bool = False  # estimated from a stored run of the same case, not the rough model
    forced: list[str] = field(default_factory=list)  # what --force lets it run with


@dataclass
class Problem:
    """A reason not to run: `message` says what is wrong and the fix; `cases` the cases it hits.
    A forceable one does not stop a run with --force (the records say so)."""

    message: str
    cases: list[str]
    forceable: bool = False

    def line(self) -> str:
        """The problem as the plan prints it: "CASE and N more cases: MESSAGE"."""
        if not self.cases:  # the run's, not a case's (the store)
            return self.message
        more = len(self.cases) - 1
        who = self.cases[0] + (f" and {more} more case{'s' * (more > 1)}" if more else "")
        return f"{who}: {self.message}"


@dataclass
class Plan:
    """Every case of a suite with its checks and estimate. `suite` holds the cases as they will
    run: a forced case may differ from the suite file's (its batch size)."""

    suite: Suite
    cases: list[PlannedCase]
    problems: list[Problem]
    force: bool = False

    @property
    def blocking(self) -> list[Problem]:
        """The problems that stop the run: those --force cannot override, and without --force
        the forceable ones too."""
        return [p for p in self.problems if not (p.forceable and self.force)]

    @property
    def estimate_s(self) -> float:
        """The seconds the whole run should take: its cases' estimates summed."""
        return sum(c.estimate_s for c in self.cases)

    def forced(self) -> dict[str, list[str]]:
        """Case key -> what --force let it run with, for RunOptions.forced."""
        return {c.key: c.forced for c in self.cases if c.forced} if self.force else {}


def make_plan(suite: Suite, store_path: str | Path, options: RunOptions,
              force: bool = False, machine: bool = True) -> Plan:
    """The plan of running `suite` with `options` (its rounds, passes, --resume) into the store
    at `store_path`; `force` lets the forceable problems run. `machine=False` leaves out what
    another measurement would disturb or change: loading each framework in a child process
    (its CPU would fall on that measurement) and the free memory (which it holds); that is the
    plan made before waiting for the measurement lock."""
    problems: list[tuple[str, str, bool]] = []  # (case name, message, forceable)
    store_problem = _store_problem(Path(store_path))
    if store_problem:
        problems.append(("", store_problem, False))
    history, stored = ({}, {}) if store_problem else _history(Path(store_path))

    def skipped(key: str) -> bool:
        row = stored.get(key) if options.resume else None
        return row is not None and resume_skips(row["status"], row["runs"], options.rounds)

    keys = case_keys(suite.cases, options.code_version)
    planned = [PlannedCase(case, key, name, skipped=skipped(key)) for case, key, name
               in zip(suite.cases, keys, _case_names(suite.cases), strict=True)]
    todo = [p for p in planned if not p.skipped]
    # before the datasets are loaded here: they are not the run's
    free = _free_memory_bytes() if machine else None
    absent = {name: not_installed(name) for name in {p.case.framework for p in todo}}
    for p in todo:  # n/a: the suite's reason, or the command that installs the framework
        p.unsupported = suite.not_run_reason(p.case) or absent[p.case.framework]
    asked = [p for p in todo if not p.unsupported] if machine else []
    support = probe([p.case for p in asked])
    for p, reason in zip(asked, support.unsupported, strict=True):
        p.unsupported = reason
    datasets = load_datasets({(p.case.dataset, dataset_file(p.case)) for p in todo},
                         options.data_dir)
    cpus = len(usable_cpus())
    together: dict[int, list[tuple[PlannedCase, float]]] = {}  # by seed: peaks, for turns
    for p in todo:
        case = p.case
        if case.framework in support.broken:
            problems.append((p.name, support.broken[case.framework], False))
            continue
        if p.unsupported:  # recorded as n/a by the run: nothing of it is measured
            continue
        if case.threads > cpus:
            problems.append((p.name, f"threads = {case.threads}, but this process may use "
                                     f"{cpus} CPUs: the run would measure threads waiting for "
                                     f"cores, not the framework; set threads = {cpus} (--threads "
                                     f"{cpus}), or --force to measure it anyway", True))
            p.forced.append(f"threads {case.threads} > {cpus} usable CPUs")
        data = datasets[case.dataset, dataset_file(case)]
        if isinstance(data, str):
            problems.append((p.name, data, False))
            continue
        fit = _fit_problems(p, data)
        problems += [(p.name, message, forceable) for message, forceable in fit]
        if any(not forceable for _, forceable in fit):
            continue
        if p.case != case:  # a forced batch size is another case, with a key of its own
            (p.key,) = case_keys([p.case], options.code_version)
            p.skipped = skipped(p.key)
            if p.skipped:
                continue
        past = history.get(_signature(p.case))
        need = _peak_memory_bytes(p.case, data, past)
        together.setdefault(p.case.seed, []).append((p, need))
        if free is not None and need > free:
            problems.append((p.name, f"needs about {need / MIB:,.0f} MiB at its peak, and "
                                     f"{free / MIB:,.0f} MiB are free: it would swap (or be "
                                     f"killed); {_smaller(p.case)}, free memory, or --force",
                             True))
            p.forced.append(f"estimated peak {need / MIB:,.0f} MiB > {free / MIB:,.0f} MiB free")
        row = stored.get(p.key) if options.resume else None
        remaining = options
        if row is not None and row["status"] == Status.OK:  # --resume adds the passes it lacks
            remaining = replace(
                options, rounds=options.rounds - row["runs"],
                memory=options.memory and _missing(row["alloc_bytes"]),
                count_instructions=options.count_instructions and _missing(
                    row.get("instructions_per_step")) and not row.get("instructions_note"))
        p.estimate_s, p.from_history = _estimate(p.case, data, past, remaining)
    if free is not None and options.turn_steps and options.turns_across_models:
        for alive in together.values():  # a seed's processes, all alive through a round
            need = sum(peak for _, peak in alive)
            if len(alive) > 1 and need > free:
                problems.append(("", f"the {len(alive)} processes that take turns together "
                                     f"(turns_across_models) need about {need / MIB:,.0f} MiB "
                                     f"at their peaks, and {free / MIB:,.0f} MiB are free: they "
                                     "would swap (or be killed); set turns_across_models = "
                                     "false, free memory, or --force", True))
                for p, _ in alive:
                    p.forced.append(f"{len(alive)} processes in turns need about "
                                    f"{need / MIB:,.0f} MiB > {free / MIB:,.0f} MiB free")
    cases = [p.case for p in planned]
    return Plan(replace(suite, cases=cases), planned, _grouped(problems), force)


def _grouped(problems: list[tuple[str, str, bool]]) -> list[Problem]:
    """One Problem per message, naming every case it hits, in the order first seen."""
    grouped: dict[tuple[str, bool], Problem] = {}
    for name, message, forceable in problems:
        grouped.setdefault((message, forceable), Problem(message, [], forceable))
        if name:
            grouped[message, forceable].cases.append(name)
    return list(grouped.values())


def _case_names(cases: list[Case]) -> list[str]:
    """Each case's label, with the settings that tell it apart from cases of the same label
    (batch size, width, sequence length, fold)."""
    labels = [c.label() for c in cases]
    names = []
    for case, label in zip(cases, labels, strict=True):
        extra = case.extra
        bits = [f"{name} {value}" for name, value in (("width", extra.width),
                                                      ("seq len", extra.seq_len)) if value]
        if extra.fold is not None:
            bits.append(f"fold {extra.fold + 1}/{extra.folds}")
        if any(c.batch_size != case.batch_size for c in cases if c.label() == label):
            bits.insert(0, f"batch {case.batch_size}")
        names.append(label + (f" ({', '.join(bits)})" if bits else ""))
    return names


def _fit_problems(p: PlannedCase, data: Dataset) -> list[tuple[str, bool]]:
    """Whether the dataset fits the case's model: (message, forceable) for each way it does
    not. A forceable misfit is mended in `p` (its case and `forced`)."""
    case = p.case
    spec = case_spec(case)
    x_train, y_train, x_test, y_test = case_split(case, data)
    out: list[tuple[str, bool]] = []
    features, wanted = math.prod(x_train.shape[1:]), math.prod(spec.input_shape)
    if features != wanted:
        out.append((f"dataset {case.dataset!r} has {features} features per example, model "
                    f"{case.model!r} takes {wanted} {spec.input_shape}; use its own dataset "
                    f"(dataset = \"{spec.dataset}\")", False))
    outputs = spec.output_shapes()[-1][-1]
    classes = max(outputs, 2)  # one output: labels 0 and 1
    labels = np.concatenate([y_train, y_test])
    low, high = int(labels.min(initial=0)), int(labels.max(initial=0))
    if low < 0 or high >= classes:
        out.append((f"the labels of dataset {case.dataset!r} run from {low} to {high}, and model "
                    f"{case.model!r} has {classes} classes (labels 0 to {classes - 1}); use its "
                    f"own dataset (dataset = \"{spec.dataset}\")", False))
    n = len(x_train)
    if n == 0:
        out.append((f"dataset {case.dataset!r} has no training examples: nothing would train; "
                    "use another dataset", False))
        return out
    single = "1 training step: nothing timed after the warm-up"
    if n < case.batch_size:
        # forced, one batch per epoch: with one epoch, one step in all, and that is the warm-up
        out.append((f"{n:,} training examples make no full batch of {case.batch_size:,}, so "
                    f"nothing would train (an incomplete batch is dropped); set batch_size to "
                    f"{n:,} or less{' or raise train_limit' if case.train_limit else ''}, or "
                    f"--force to train on batches of all {n:,}"
                    + (" (with 1 epoch that is 1 step, the warm-up: nothing would be timed; "
                       "raise epochs too)" if case.epochs == 1 else ""), True))
        p.forced.append(f"batch_size {case.batch_size:,} > {n:,} training examples: "
                        f"batches of {n:,}")
        p.forced += [single] if case.epochs == 1 else []
        p.case = replace(case, batch_size=n)
    elif case.epochs * (n // case.batch_size) == 1:
        out.append(("1 training step in all, and the first step of a run is its warm-up: no "
                    "step would be timed; raise epochs, or lower batch_size, or --force", True))
        p.forced.append(single)
    return out


def _smaller(case: Case) -> str:
    return "lower batch_size" + (" or width" if case.extra.width else "")


def load_datasets(names: set[tuple[str, str | None]],
              data_dir: str | None) -> dict[tuple[str, str | None], Dataset | str]:
    """Each dataset by (name, file or None), loaded once (float32: shapes and labels are what
    is checked), or the one line that says why it cannot be."""
    out: dict = {}
    for name, file in names:
        try:
            out[name, file] = load_dataset(name, data_dir, file=file)
        except DatasetError as error:
            out[name, file] = str(error)
    return out


def _store_problem(path: Path) -> str | None:
    """Why the run could not store its results at `path`, or None. Writes nothing there."""
    if path.is_dir():
        return f"--store {path} is a folder; give a file, e.g. {path / 'adh.sqlite'}"
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            return f"cannot write the store {path} (permissions); fix them or pass --store"
        try:
            ResultsStore(path, read_only=True).close()  # refuses what is not a results store
        except StoreError as error:
            return str(error)
    # The folder too, by a real write: SQLite writes its journal beside the store, and root
    # "may" write to /proc by os.access while the file system says no.
    folder = next(p for p in path.absolute().parents if p.exists())
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError:
        return f"cannot {'write' if path.exists() else 'create'} the store {path}: {folder} is " \
               "not a folder this user may write to; pass --store with a path that is"
    return None


def _signature(case: Case) -> str:
    """What makes two cases the same for the estimate: every setting but the suite and the
    number of epochs (the estimate scales with those)."""
    settings = case.settings()
    del settings["suite"], settings["epochs"]
    return json.dumps(settings, sort_keys=True)


def _history(path: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """From the store at `path`: the newest measured case of each signature that recorded its
    passes' wall times, and every stored case by key."""
    if not path.exists():
        return {}, {}
    with ResultsStore(path, read_only=True) as store:
        stored = store.summaries()
    history = {_signature(row["case"]): row for row in stored  # oldest first: the newest wins
               if row["status"] == Status.OK
               and row["provenance"].get("pass_wall_s", {}).get("time")}
    return history, {row["key"]: row for row in stored}


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _estimate(case: Case, data: Dataset, past: dict | None,
              options: RunOptions) -> tuple[float, bool]:
    """(seconds of the passes `options` runs for `case`, from history)."""
    passes = options.rounds
    if past is not None:
        walls = past["provenance"]["pass_wall_s"]
        trained = sum(0.0 if _missing(past[k]) else past[k]
                      for k in ("warmup_s", "train_time_s", "eval_time_s"))
        startup = max(median(walls["time"]) - trained, 0.0)

        def scaled(wall: float) -> float:  # to this case's epochs; start-up does not scale
            return wall + (case.epochs / past["case"].epochs - 1) * max(wall - startup, 0.0)

        timing = scaled(median(walls["time"]))
        memory = scaled(walls["memory"]) if "memory" in walls else \
            ROUGH_MEMORY_PASS_FACTOR * timing
        counting = walls.get("instructions", ROUGH_INSTRUCTIONS_PASS_S)
        return (passes * timing + options.memory * memory
                + options.count_instructions * counting), True

    return rough_estimate(case, data, options,
                          cached_gemm_peak_gflops(case.threads) or ROUGH_PEAK_GFLOPS), False


def rough_estimate(case: Case, data: Dataset, options: RunOptions,
                   gemm_peak_gflops: float) -> float:
    """The rough model's seconds for the passes `options` runs of `case`: its training and test
    FLOPs at a share of `gemm_peak_gflops`, plus each process's start-up. Given a fixed peak it
    depends on the case and the dataset's size alone (harness.run.shards balances shards with
    it)."""
    spec = case_spec(case)
    x_train, _, x_test, _ = case_split(case, data)
    rate = 1e9 * ROUGH_PEAK_SHARE * gemm_peak_gflops
    step_flops = train_step_flops(spec)
    steps = case.epochs * (len(x_train) // case.batch_size)
    evaluated = case.epochs * len(x_test) / case.batch_size * step_flops / 3  # forward only
    training = (steps * step_flops + evaluated) / rate
    startup = ROUGH_STARTUP_S.get(case.framework, ROUGH_STARTUP_DEFAULT_S)
    return (options.rounds * (startup + training)
            + options.memory * (startup + ROUGH_MEMORY_PASS_FACTOR * training)
            + options.count_instructions * ROUGH_INSTRUCTIONS_PASS_S)


def _peak_memory_bytes(case: Case, data: Dataset, past: dict | None) -> float:
    """The case's peak resident memory: the stored one of the same case, else the rough model
    (the process's base, the dataset, parameters with gradient and optimizer state, and each
    layer's output for a batch, a few times over)."""
    if past is not None and not _missing(past.get("peak_rss_bytes")):
        return float(past["peak_rss_bytes"])

    spec = case_spec(case)
    itemsize = np.dtype(case.dtype).itemsize
    examples = (len(data.x_train) + len(data.x_test)) * math.prod(data.x_train.shape[1:])
    parameters = sum(math.prod(p.shape) for p in spec.parameters())
    outputs = case.batch_size * sum(math.prod(s) for s in spec.output_shapes())
    base = ROUGH_BASE_RSS.get(case.framework, ROUGH_BASE_RSS_DEFAULT)
    return base + itemsize * (2 * examples + 4 * parameters + ACTIVATION_COPIES * outputs)


def _free_memory_bytes() -> float | None:
    """MemAvailable of /proc/meminfo (Linux), or None where there is none."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def format_duration(seconds: float) -> str:
    """"45 s", "2 min 05 s", "10 min 13 s", "25 min", "3 h 20 min"."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 1200:  # a short suite's estimate and actual told apart (quick aims at 10 min)
        return f"{whole // 60} min {whole % 60:02d} s"
    minutes = round(seconds / 60)
    if minutes < 60:  # 59.6 min is "1 h 00 min", not "60 min"
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def estimate_line(plan: Plan) -> str:
    """"Estimated duration: about 12 min (9 of 9 cases from the store's history)"."""
    todo = [c for c in plan.cases if not c.skipped and not c.unsupported]
    if not todo:
        return "Nothing to run."
    known = sum(c.from_history for c in todo)
    source = ("from the store's history of the same cases" if known == len(todo) else
              "rough: FLOPs at a share of this machine's GEMM peak, no history of these cases"
              if not known else f"{known} of {len(todo)} cases from the store's history, "
                               "the others rough")

    if any(cached_gemm_peak_gflops(c.case.threads) is None for c in todo if not c.from_history):
        source += f"; this machine's GEMM peak is not measured yet: {ROUGH_PEAK_GFLOPS:.0f} " \
                  "GFLOP/s assumed (a real run measures it first)"
    return f"Estimated duration: about {format_duration(plan.estimate_s)} ({source})"


def format_plan(plan: Plan) -> str:
    """The plan as text: one line per case (runs, skipped, n/a, forced; its estimate), the
    estimate, then every problem."""
    lines = [f"Plan of suite {plan.suite.name}: {len(plan.cases)} cases"]
    for c in plan.cases:
        if c.skipped:
            state = "skip (finished, --resume)"
        elif c.unsupported:
            said = "left out" if plan.suite.not_run_reason(c.case) else "n/a"
            state = f"{said} ({c.unsupported})"
        else:
            state = f"run   ~{format_duration(c.estimate_s)}"
        forced = f"  [forced: {'; '.join(c.forced)}]" if c.forced and plan.force else ""
        lines.append(f"  {c.name:<48} {state}{forced}")
    lines.append(estimate_line(plan))
    if plan.blocking:
        lines.append("\n" + format_problems(plan))
    return "\n".join(lines)


def format_problems(plan: Plan) -> str:
    """"N problems, nothing was run:" and one line per problem that stops the run."""
    blocking = plan.blocking
    return "\n".join([f"{len(blocking)} problem{'s' * (len(blocking) > 1)}, nothing was run:",
                      *(f"  - {p.line()}" for p in blocking)])
