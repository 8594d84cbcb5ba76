"""`adh merge OUT IN...`: the stores of a suite's shards (or of any runs) joined into one.

Each case key is kept once, with all its rows and its provenance as measured: where several
stores hold the same key, the most complete copy wins (finished before unfinished, then the
one with more timing passes, then the one stored last). An OUT that exists takes part as one
of the inputs. Merging never pools machines by itself: tables, reports and comparisons of the
merged store refuse cases of different machines unless asked (harness.results.machines).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import UsageError
from harness.results.machines import require_one_machine
from harness.results.records import FINISHED, Status
from harness.results.store import ResultsStore


@dataclass
class MergeSummary:
    cases: int = 0  # in OUT afterwards
    copied: dict[str, int] = field(default_factory=dict)  # input -> cases taken from it
    duplicates: int = 0  # keys found in more than one store
    machines: list[str] = field(default_factory=list)  # of the cases that ran (status ok)


def _rank(row) -> tuple:
    """Which copy of a case (a row of `ResultsStore.cases`) is kept: the highest rank."""
    return (row.status in FINISHED, row.status == Status.OK, row.runs, row.stored_at)


def merge_stores(out: str | Path, inputs: list[str | Path]) -> MergeSummary:
    """Merge the stores `inputs` into the store `out` (created if missing)."""
    out = Path(out)
    paths = [Path(p) for p in inputs]
    for path in paths:
        if not path.is_file():
            raise UsageError(f"no results store at {path}; give the .sqlite files the shards "
                             "wrote (adh run --store)")
    if out.exists():
        paths = [out, *[p for p in paths if p.resolve() != out.resolve()]]
    best: dict[str, tuple[tuple, Path, int]] = {}  # key -> (rank, store, case id)
    seen: dict[str, int] = {}
    for path in paths:
        with ResultsStore(path, read_only=True) as store:
            cases = store.cases()
            for row in cases.itertuples(index=False):
                seen[row.key] = seen.get(row.key, 0) + 1
                rank = _rank(row)
                if row.key not in best or rank > best[row.key][0]:
                    best[row.key] = (rank, path, int(row.id))
    summary = MergeSummary(duplicates=sum(n > 1 for n in seen.values()))
    with ResultsStore(out) as target:
        for path in paths:
            taken = [(key, case_id) for key, (_, p, case_id) in best.items() if p == path]
            summary.copied[str(path)] = len(taken)
            if path == out:
                continue
            with ResultsStore(path, read_only=True) as source:
                stored_at = dict(zip(source.cases()["id"], source.cases()["stored_at"],
                                     strict=True))
                for _, case_id in taken:
                    target.save(source.load(case_id), stored_at=stored_at[case_id])
        merged = target.cases()
        summary.cases = len(merged)
        # the rule tables and comparisons apply (the cases that ran), here only to name them
        summary.machines = require_one_machine(merged, str(out), allow=True)
    return summary


def format_summary(out: str | Path, summary: MergeSummary) -> str:
    """What `adh merge` prints."""
    lines = [f"{summary.cases} cases in {out}"
             + (f" ({summary.duplicates} found in more than one store: the most complete copy "
                "kept)" if summary.duplicates else "")]
    lines += [f"  {n} from {path}" for path, n in summary.copied.items()]
    if len(summary.machines) > 1:
        lines.append(f"results of {len(summary.machines)} machines: "
                     + "; ".join(summary.machines)
                     + "; tables and comparisons keep them apart (--allow-mixed-machines pools "
                     "them)")
    return "\n".join(lines)
