"""What one finished case leaves behind: the contract between runner, store, report and compare.

A case is one model x framework x dataset x settings x seed, run in a fresh process. Its result
is a `CaseResult`: the settings that define it, its outcome, the summary numbers of the timing
pass and the memory pass, the per-epoch accuracy, the per-batch series, the per-step times, and
the provenance that says where and how it ran.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

STATUSES = ("ok", "diverged", "failed", "timeout", "crashed", "interrupted")


@dataclass(frozen=True)
class Case:
    """Everything that defines a run; two cases with equal fields measure the same thing."""

    suite: str
    model: str
    framework: str
    dataset: str
    seed: int = 0
    epochs: int = 1
    batch_size: int = 100
    optimizer: str = "sgd"
    lr: float = 0.1
    threads: int = 2
    dtype: str = "float32"
    train_limit: int | None = None  # use only the first N training examples (None: all)
    extra: tuple[tuple[str, Any], ...] = ()  # e.g. (("width", 256),) for the scaling suite

    def settings(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra"] = dict(self.extra)
        return d

    def key(self, code_version: str) -> str:
        """Stable id of (settings, code version): `--resume` skips a key already stored."""
        blob = json.dumps({"case": self.settings(), "code": code_version}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def label(self) -> str:
        return f"{self.model}/{self.framework}/{self.dataset}/seed{self.seed}"


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
class CaseResult:
    case: Case
    key: str
    status: str  # one of STATUSES
    reason: str = ""  # why it is not "ok"
    provenance: dict[str, Any] = field(default_factory=dict)
    # Timing pass. Warm-up (the first step: buffer creation, caches, lazy init) is kept apart.
    warmup_s: float | None = None
    train_time_s: float | None = None  # all epochs, warm-up step excluded, evaluation excluded
    eval_time_s: float | None = None
    step_times_s: list[float] = field(default_factory=list)  # every timed step, in order
    foreign_cpu_s: float | None = None  # CPU time other processes used during the timed pass
    contended: bool = False
    # Memory pass (memray around the training loop only).
    alloc_bytes: int | None = None  # total bytes allocated
    alloc_count: int | None = None  # number of allocations (frees not counted)
    peak_bytes: int | None = None  # peak live bytes inside the loop
    peak_rss_bytes: int | None = None  # the process's peak resident set size
    # Work.
    flops_per_step: float | None = None
    gemm_peak_gflops: float | None = None
    epochs: list[EpochRecord] = field(default_factory=list)
    batches: list[BatchRecord] = field(default_factory=list)

    @property
    def step_median_s(self) -> float | None:
        if not self.step_times_s:
            return None
        s = sorted(self.step_times_s)
        m = len(s) // 2
        return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2
