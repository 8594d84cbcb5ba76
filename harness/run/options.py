"""The options of a run: what `adh run`'s flags and the suite file decide beyond the cases
(the data folder, resume, the memory pass, rounds and more rounds, turns, instruction counts,
the time limit, the code version that keys each case).

One owner: `RunOptions.from_suite(suite, **overrides)` is how `adh run`, `adh compare`, the Python
API and the cluster path make them, so that a suite's protocol is read in one place."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from harness.run.suites import MoreRounds, Suite


@dataclass(frozen=True)
class RunOptions:
    """How a suite's cases are measured, beyond the cases themselves; immutable: a variant is
    `dataclasses.replace(options, ...)`."""

    data_dir: str | None = None
    resume: bool = False
    memory: bool = True
    timeout_s: float = 3600
    progress: bool = True
    code_version: str = "unknown"
    code_dir: str | None = None  # run the worker from this source tree (another commit's checkout)
    rounds: int = 1  # timing passes per case, each in a fresh process
    more_rounds: MoreRounds | None = None  # then more, while the ratios are too wide
    # Steps a turn where one model's frameworks take turns (run_turns); 0: each pass alone.
    turn_steps: int = 0
    # With turns: every model's frameworks of a seed take turns together (the suite's
    # turns_across_models), not each model's apart.
    turns_across_models: bool = False
    count_instructions: bool = False  # one more pass per case, under valgrind
    # The last steps of each timing pass's training, run under the framework's profiler for the
    # attribution of its step to op groups (harness.results.attribution); 0: none.
    attribution_steps: int = 0
    attribution_rounds: int = 0  # only the first this many rounds attribute; 0: every round
    command: str = ""  # the `adh run` command as typed, recorded in each case's provenance
    # Experiments with the measured process's setup (scripts/bench_spread.py): variables to set
    # (None: unset) over the measurement policy, and a command to start the worker under.
    env: dict[str, str | None] = field(default_factory=dict)
    launcher: tuple[str, ...] = ()
    # Cases run although the plan found them meaningless (adh run --force): case key -> what
    # was forced, recorded in the case's provenance ("forced") and marked in its tables.
    forced: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_suite(cls, suite: Suite, **overrides: Any) -> RunOptions:
        """The options `suite` decides (its memory pass, time limit, rounds, rounds until
        narrow, turns, attribution steps and rounds), then `overrides` (a command's flags, by
        field name) over them."""
        return replace(cls(memory=suite.memory, timeout_s=suite.timeout_s, rounds=suite.rounds,
                           more_rounds=suite.more_rounds, turn_steps=suite.turns,
                           turns_across_models=suite.turns_across_models,
                           attribution_steps=suite.attribution,
                           attribution_rounds=suite.attribution_rounds), **overrides)
