"""`adh run SUITE --shard I/N`: one of N disjoint parts of a suite, of about equal cost, so that
N CI jobs or machines run a suite between them (`adh merge` then joins their stores).

The unit of the split is a comparison: a model's cases that differ only by framework (same
dataset, seed, batch size, ...) stay in one shard, so that every ratio against the reference
framework pairs processes of one machine, measured round by round side by side (harness.run.runner);
a suite therefore splits into at most as many shards as it has comparisons. The comparisons are
dealt out longest first, each to the shard with the least cost so far (ties to the lower
shard), with the plan's rough cost model at a fixed GEMM peak: every job computes the same split
from the suite alone, whatever its machine or its store holds. Within a shard the cases keep the
suite's order.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace

from harness.contract.cases import Case, dataset_file
from harness.errors import UsageError
from harness.run.options import RunOptions
from harness.run.plan import ROUGH_PEAK_GFLOPS, load_datasets, rough_estimate
from harness.run.suites import Suite


def parse_shard(text: str) -> tuple[int, int]:
    """(I, N) from "I/N", 1 <= I <= N; UsageError otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard {text}: give I/N with 1 <= I <= N, e.g. --shard 2/3 for the "
                         "second of three shards")
    return int(match[1]), int(match[2])


def comparison(case: Case) -> str:
    """What a case shares with the cases it is compared with: every setting but the framework."""
    settings = case.settings()
    del settings["framework"]
    return json.dumps(settings, sort_keys=True)


def case_costs(suite: Suite, options: RunOptions, data_dir: str | None) -> list[float]:
    """Each case's rough cost in seconds at a fixed GEMM peak (harness.run.plan.rough_estimate); a
    case whose dataset cannot be loaded costs its start-up (the plan reports the problem)."""
    datasets = load_datasets({(c.dataset, dataset_file(c)) for c in suite.cases}, data_dir)
    costs = []
    for case in suite.cases:
        data = datasets[case.dataset, dataset_file(case)]
        costs.append(1.0 if isinstance(data, str)
                     else rough_estimate(case, data, options, ROUGH_PEAK_GFLOPS))
    return costs


def split(groups: dict[str, float], count: int) -> list[list[str]]:
    """`groups` (name -> cost) dealt into `count` lists of about equal total cost: longest first,
    each to the least loaded list, ties broken by name and by list index."""
    shards: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for name, cost in sorted(groups.items(), key=lambda item: (-item[1], item[0])):
        i = min(range(count), key=lambda k: (loads[k], k))
        shards[i].append(name)
        loads[i] += cost
    return shards


def shard_suite(suite: Suite, index: int, count: int, options: RunOptions,
                data_dir: str | None = None) -> Suite:
    """Shard `index` of `count` (1-based) of `suite`; UsageError when the suite has fewer
    comparisons than shards."""
    keys = [comparison(case) for case in suite.cases]
    costs: dict[str, float] = {}
    for key, cost in zip(keys, case_costs(suite, options, data_dir), strict=True):
        costs[key] = costs.get(key, 0.0) + cost
    if count > len(costs):
        raise UsageError(f"--shard {index}/{count}: suite {suite.name!r} has {len(costs)} "
                         f"comparison{'s' * (len(costs) != 1)} (a model's frameworks run in one "
                         f"shard, so that their ratios come from one machine); use at most "
                         f"{len(costs)} shards")
    mine = set(split(costs, count)[index - 1])
    return replace(suite, cases=[c for c, k in zip(suite.cases, keys, strict=True) if k in mine])


def shard_of(suite: Suite, text: str, options: RunOptions, data_dir: str | None = None
             ) -> tuple[Suite, int, int]:
    """`adh run --shard I/N`: the I-th of N parts of `suite` (`shard_suite`), with I and N as
    `text` gives them; UsageError where `text` is not I/N."""
    index, count = parse_shard(text)
    return shard_suite(suite, index, count, options, data_dir), index, count
