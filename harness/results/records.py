"""What one finished case leaves behind: the contract between runner, store, report and compare.

A case (harness.contract.cases) is one model x framework x dataset x settings x seed. Its
result is a `CaseResult`: the settings that define it, its outcome, its timing passes
(`RunRecord`, one fresh process per round, with the per-step times), the memory pass, the
per-epoch accuracy, the per-batch series, and the provenance that says where and how it ran.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from statistics import median
from typing import TYPE_CHECKING, Any

from harness.constants import DEFAULT_STORE  # noqa: F401 - kept here, where the store's users import it
from harness.contract.cases import Case

if TYPE_CHECKING:  # numpy and scipy load only when asked: a worker pins its threads first
    from harness.measure.stats import Estimate



class Status(StrEnum):
    """How a case ended. Stored as its value, a plain string in SQLite and CSV, and equal to it:
    a status read back from a store compares equal to its member."""

    OK = "ok"  # measured: every round so far ran to the end
    DIVERGED = "diverged"  # the loss ran away and training stopped: a result, not an error
    FAILED = "failed"  # the worker raised
    TIMEOUT = "timeout"  # a pass ran past the time limit
    CRASHED = "crashed"  # the worker process died
    INTERRUPTED = "interrupted"  # Ctrl-C before its first round was stored
    # The framework does not support the case (Framework.supports, .dtypes): the reason says why.
    # Not run and no failure: the tables show "n/a (reason)", the figures leave it out. (Not
    # stored as "n/a", which pandas reads back from CSV as a missing value.)
    UNSUPPORTED = "unsupported"
    # The suite declares the case but does not run it, for what it costs (Suite.not_run): the
    # framework could run it. The tables show "left out (reason)", the figures say so.
    LEFT_OUT = "left out"


# `--resume` skips these; the others run again.
FINISHED = frozenset({Status.OK, Status.DIVERGED, Status.UNSUPPORTED, Status.LEFT_OUT})
NOT_RUN = (Status.UNSUPPORTED, Status.LEFT_OUT)  # recorded without running: no failure


@dataclass
class EpochRecord:
    epoch: int  # 1-based
    train_loss: float  # mean over the epoch's batches
    train_acc: float  # mean training accuracy over the epoch's batches, in [0, 1]
    test_loss: float
    test_acc: float  # after the epoch, in [0, 1]
    train_time_s: float  # training steps of this epoch, evaluation excluded
    eval_time_s: float


@dataclass
class BatchRecord:
    epoch: int
    batch: int  # 0-based within the epoch
    loss: float
    acc: float


@dataclass
class RunRecord:
    """One timing pass of a case: one fresh process, in one round of the suite's schedule."""

    round: int  # 0-based; the runs of one round of a suite ran next to each other
    step_times_s: list[float]  # every timed step after the warm-up, in order
    warmup_steps: int  # leading steps left out as warm-up (measured: harness.measure.warmup)
    warmup_s: float  # their time
    train_time_s: float  # all epochs' timed steps: no warm-up, evaluation or profiled steps
    eval_time_s: float
    foreign_cpu_s: float | None = None  # CPU time other processes used during the pass
    contended: bool = False  # other processes took more than the runner's threshold
    drift: bool = False  # the host changed speed (harness.measure.drift)
    probe_before_s: float | None = None  # the drift probe, timed by the runner before and after
    probe_after_s: float | None = None
    attempts: int = 1  # passes run for this round (a contended or drifted one is repeated)
    started_at: str | None = None
    # Taking turns (harness.run.processes.run_turns): steps a turn (0: the pass ran alone), and the
    # median step of each turn, by turn (None: a turn of warm-up steps only).
    turn_steps: int = 0
    turn_medians_s: list[float | None] = field(default_factory=list)
    facts: dict[str, Any] | None = None  # of the process (harness.measure.process_facts)
    # where its step's time goes, by op group, from its last steps of training, profiled
    # (harness.results.attribution.Attribution.as_dict); None: not asked for, or not measured
    attribution: dict[str, Any] | None = None

    @property
    def flagged(self) -> bool:
        """Contended or drifted: its numbers are kept, but not used while cleaner runs exist."""
        return self.contended or self.drift

    @property
    def median_s(self) -> float | None:
        return float(median(self.step_times_s)) if self.step_times_s else None


# The fields of a CaseResult that its memory pass fills
MEMORY_PASS_FIELDS = ("alloc_bytes", "alloc_count", "peak_bytes", "peak_rss_bytes")


@dataclass
class CaseResult:
    """A case and its runs: the timing pass in several processes (`runs`, one per round), the
    memory pass once, and the epochs and batches of the first run (training is deterministic:
    every run trains the same way)."""

    case: Case
    key: str
    status: Status
    reason: str = ""  # why it is not Status.OK
    provenance: dict[str, Any] = field(default_factory=dict)  # of the first run
    runs: list[RunRecord] = field(default_factory=list)
    # Memory pass (memray around the training loop only).
    alloc_bytes: int | None = None  # total bytes allocated
    alloc_count: int | None = None  # number of allocations (frees not counted)
    peak_bytes: int | None = None  # peak live bytes inside the loop
    peak_rss_bytes: int | None = None  # the process's peak resident set size
    # Instructions pass (valgrind, --count-instructions): per step, or why not measurable.
    instructions_per_step: float | None = None
    instructions_note: str = ""
    # Work.
    flops_per_step: float | None = None
    gemm_peak_gflops: float | None = None
    epochs: list[EpochRecord] = field(default_factory=list)
    batches: list[BatchRecord] = field(default_factory=list)

    @property
    def used_runs(self) -> list[RunRecord]:
        """The runs the summary numbers come from: the clean ones, or all when none is clean."""
        clean = [r for r in self.runs if not r.flagged]
        return clean or self.runs

    @property
    def instructions_counted(self) -> bool:
        """The instructions pass has run: a count, or a note why there is none."""
        return self.instructions_per_step is not None or bool(self.instructions_note)

    @property
    def flagged(self) -> bool:
        """Every run was contended or drifted: the summary numbers come from disturbed runs."""
        return bool(self.runs) and all(r.flagged for r in self.runs)

    @property
    def step_time(self) -> Estimate:
        """The median of the used runs' median step times, with its 95 % interval."""
        from harness.measure.stats import estimate  # noqa: PLC0415 - scipy: a CaseResult is unpickled in a cluster task before it pins its threads

        return estimate([r.median_s for r in self.used_runs if r.median_s is not None])

    def _median(self, name: str) -> float | None:
        values = [getattr(r, name) for r in self.used_runs if getattr(r, name) is not None]
        return float(median(values)) if values else None

    @property
    def train_time_s(self) -> float | None:
        return self._median("train_time_s")

    @property
    def eval_time_s(self) -> float | None:
        return self._median("eval_time_s")

    @property
    def warmup_s(self) -> float | None:
        return self._median("warmup_s")

    @property
    def foreign_cpu_s(self) -> float | None:
        """The most CPU time other processes took during one of the runs."""
        values = [r.foreign_cpu_s for r in self.runs if r.foreign_cpu_s is not None]
        return max(values) if values else None
