"""More rounds while a suite's ratios are too wide (a suite's `until_within`): which cases take
another round, and in what order when the time left does not hold them all.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from harness.measure.stats import half_width, pairs_within, values_to_narrow, with_machine_scale
from harness.results.estimates import REFERENCE, earlier_verdicts, step_ratios
from harness.results.records import CaseResult, Status
from harness.results.store import ResultsStore
from harness.run.options import RunOptions

# A round is planned at its cases' last pace times this: on the 2-vCPU VMs the host's speed moved
# by 3-27 % within a quick run, and a path of rounds planned at the last pace alone was begun
# and then cut off short of the pairs it was for (four rounds from 5 to 9 pairs stopped at 7:
# their time spent, their interval no narrower).
PACE_MARGIN = 1.25


def wide_units(store: ResultsStore, suite: str, units: list[list[CaseResult]],
               options: RunOptions, rounds: int, elapsed_s: float, case_s: dict[tuple, float],
               note: Callable[[str], None] = lambda m: None) -> list[list[CaseResult]]:
    """What `options.more_rounds` runs another round of after `rounds`: of each unit of `units` (a
    model's frameworks taking turns, or one case), the cases whose step ratio against torch
    (harness.results.estimates.step_ratios, over the store's runs of these cases) reaches further
    than the rule's `within`, with torch's case of their settings (a ratio needs both sides in the
    round); while fewer than its `most` rounds have run and another round, at its cases' last pace
    (`case_s`, a case's share of its unit's last round, by `settings_key`) with PACE_MARGIN for a
    host that slows, ends within its `minutes` of the run (`elapsed_s` so far); none when the run
    stops. A ratio that is narrow takes no more rounds, so that the time left goes to those that
    are not (as asv repeats only the benchmark whose samples are still too few). The headline
    ratios come first: while a ratio of the suite's first framework (the contestant) is wide, a
    round holds only those (with torch's cases), so that the time goes to the verdicts the suite
    is for; the other frameworks' wide ratios take rounds once every headline is narrow. Where
    the time left does not hold a round of every wide ratio, the widest go first, as many as fit
    with the rounds each needs before its interval can narrow, planned together (a later round
    holds every ratio still on its way: planned one by one, a quick run's CNN set out from 5 pairs
    for 9 beside two other models and was cut off at 8, its interval the range of 8). A ratio
    whose interval cannot narrow before more rounds than the time or `most` leave
    (`values_to_narrow`: from 6 to 8 rounds its PI is the range of its rounds, which another
    round only widens) takes none: they would spend the time and buy nothing; where no headline
    ratio can narrow so, the other frameworks' wide ratios take the rounds. `units` are all the
    run's units, whichever took the last round. Says why it goes on and why it stops."""
    rule = options.more_rounds
    if rule is None:
        return []
    keys = {r.key for unit in units for r in unit if r.status == Status.OK}
    runs = store.runs(suite)
    ratios = step_ratios(runs[runs["key"].isin(keys)])
    ratios = ratios[(ratios["framework"] != REFERENCE) & (ratios["pairs"] > 0)]
    # each ratio's PI no narrower than its pairs give at a pair's scatter in the earlier runs of
    # its cases on this machine (estimates.with_history; the between-run part the tables may
    # add on top, more pairs do not narrow: no rounds are planned for it)
    cases, history = store.cases(suite), store.verdicts()
    cases = cases[cases["key"].isin(keys)]
    earlier = {(row.model, row.framework): earlier_verdicts(history, cases, row.model,
                                                            row.framework, same_code=False)
               for row in ratios.itertuples()}
    widths = {(row.model, row.framework): half_width(
        with_machine_scale(row.ratio, earlier[row.model, row.framework])[0])
        for row in ratios.itertuples()}
    wide = {ratio: width for ratio, width in widths.items()
            if not width <= rule.within}  # NaN (no interval): wide
    if not wide:
        return []
    pairs = {(row.model, row.framework): row.pairs for row in ratios.itertuples()}
    names = sorted(f"{model} {framework}" for model, framework in wide)
    what = f"{len(names)} ratio{'s' * (len(names) > 1)} wider than ±{rule.within:.0%} " + \
        f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    if rounds >= rule.most:
        note(f"{what} after {rounds} rounds, the most until_within takes")
        return []
    order = list(dict.fromkeys(r.case.framework for unit in units for r in unit
                               if r.case.framework != REFERENCE))
    headline = {ratio: width for ratio, width in wide.items() if ratio[1] == order[0]}

    def cost(ratios: set[tuple[str, str]]) -> float:
        """A round of `ratios` (with torch's cases), at its cases' last pace."""
        return sum(case_s.get(settings_key(unit[0]), 0.0) * len(unit)
                   for unit in _round_of(units, ratios))

    def rounds_needed(ratio: tuple[str, str]) -> int:
        """Rounds until its interval can narrow at all (order statistics: 6 to 8 pairs give the
        smallest to the largest, which more pairs only widen; 9 leave one out each side), and
        until it has the pairs that reach ±within at a pair's scatter in the earlier runs."""
        per_round = sum(any((r.case.model, r.case.framework) == ratio for r in unit)
                        for unit in units) or 1
        target = max(values_to_narrow(pairs[ratio]), pairs_within(rule.within, earlier[ratio]))
        return math.ceil((target - pairs[ratio]) / per_round)

    def priority(ratio: tuple[str, str]) -> tuple[int, float]:
        return order.index(ratio[1]), -(math.inf if math.isnan(wide[ratio]) else wide[ratio])

    def path_cost(plan: dict[tuple[str, str], int]) -> float:
        """The rounds `plan` (ratio: rounds it needs) takes, each ratio until its last: a later
        round holds every ratio that still needs it, at their cases' last pace."""
        return sum(cost({ratio for ratio, needed in plan.items() if needed > r})
                   for r in range(max(plan.values(), default=0)))

    def choose(candidates: dict[tuple[str, str], float]
               ) -> tuple[set[tuple[str, str]], list[str], list[str]]:
        """The ratios of `candidates` the next round takes, widest first while the rounds each
        needs before it can narrow fit, together; those another round would not end in time
        for; those that cannot narrow within the limits."""
        plan: dict[tuple[str, str], int] = {}
        late, futile = [], []
        for ratio in sorted(candidates, key=priority):
            needed, name = rounds_needed(ratio), f"{ratio[0]} {ratio[1]}"
            if rounds + needed > rule.most:
                futile.append(f"{name}: {needed} more, past {rule.most} rounds")
            elif rule.minutes and (elapsed_s + PACE_MARGIN * path_cost({**plan, ratio: needed})
                                   > 60 * rule.minutes):
                if needed > 1:
                    futile.append(f"{name}: {needed} more, past {rule.minutes:g} minutes")
                else:
                    late.append(name)
            else:
                plan[ratio] = needed
        return set(plan), late, futile

    chosen, late, futile = choose(headline or wide)
    others = {ratio: width for ratio, width in wide.items() if ratio not in headline}
    instead = bool(headline and not chosen and others)
    if instead:  # no headline ratio can narrow in what is left: the others' take the rounds
        chosen, late_others, futile_others = choose(others)
        late, futile = late + late_others, futile + futile_others
    unable = (f"the rounds before an interval can narrow at all would not fit ({'; '.join(futile)})"
              if futile else "")
    if not chosen:
        note(f"{what} after {rounds} rounds: " + "; ".join(
            [*([unable] if unable else []),
             *([f"another would not end within {rule.minutes:g} minutes"] if late else [])]))
        return []
    going = _round_of(units, chosen)
    later = ("; the headline's cannot narrow in what is left: the others' instead" if instead
             else f"; the others' after the headline ({order[0]}) is narrow"
             if headline and others else "")
    note(f"{what}: round {rounds + 1} of " + ", ".join(  # a unit across models: model by model
        f"{model} {'+'.join(r.case.framework for r in unit if r.case.model == model)}"
        for unit in going for model in dict.fromkeys(r.case.model for r in unit))
        + (f" ({len(late)} more would not end within {rule.minutes:g} minutes)" if late else "")
        + (f" ({unable})" if unable else "") + later)
    return going


def _round_of(units: list[list[CaseResult]], ratios: set[tuple[str, str]]
              ) -> list[list[CaseResult]]:
    """Of each unit, the cases a round of `ratios` (model, framework) needs: theirs and torch's
    of the same model (a ratio needs both sides in the round)."""
    models = {model for model, _ in ratios}
    going = []
    for unit in units:
        kept = [r for r in unit if r.status == Status.OK
                and ((r.case.model, r.case.framework) in ratios
                     or (r.case.framework == REFERENCE and r.case.model in models))]
        # torch's case with the wide ones it takes turns with, or alone in its own unit
        if kept and (len(unit) == 1 or any(r.case.framework != REFERENCE for r in kept)):
            going.append(kept)
    return going


def settings_key(result: CaseResult) -> tuple:
    """`result`'s settings but the framework: what the cases that take turns share."""
    settings = result.case.settings()
    settings.pop("framework")
    return tuple(sorted((k, str(v)) for k, v in settings.items()))
