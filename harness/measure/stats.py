"""Estimates with a 95 % interval: step times with a confidence interval, their ratios with the
interval a rerun's ratio falls in.

The unit of measurement is the process: processes of the same code differ by more than the
steps within one process do (thread placement, the allocator's state, the host), so a case's
step time is summarised over its processes' medians, and a ratio between two frameworks over
rounds (one ratio per round, the two processes run next to each other, so that a slow minute
of the host cancels out).

The point estimate is the median (of the processes' medians, or of the per-round ratios): one
disturbed process cannot move it. Where a round's processes took turns
(harness.run.processes.run_turns),
its ratio is of their turns, turn by turn (`round_ratio`). Its interval:
- from 6 values on, the distribution-free interval of a median (order statistics, binomial
  coverage: scipy.stats.quantile_test), which assumes nothing about the shape of the noise;
- below 6 values, where order statistics cannot reach 95 %, Student's t-interval of the mean of
  the logarithms, taken back to the ratio scale (times and ratios are positive and their spread
  is multiplicative). For up to 6 values the median always lies inside it.

A ratio between two frameworks (or two commits) is the verdict a reader acts on and checks by
running the same command again, so its interval is a 95 % prediction interval (PI) for that
rerun (`ratio_estimate`): the rerun's median scatters as much as this run's, so the difference
of the two scatters by √2 times one, and the interval is √2 times as wide as the median's
confidence interval (in logarithms, centred on the median). A confidence interval of the ratio
would hold the next run's estimate only about 83 % of the time.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RERUN = math.sqrt(2)  # a rerun's estimate scatters as much as this one: their difference √2 x
ORDER_STATISTICS_FROM = 6  # values; fewer cannot give a distribution-free 95 % interval of a median


@dataclass(frozen=True)
class Estimate:
    """A median (or, for paired differences, a mean: `mean_difference`) over `n` values with its
    95 % interval (`low`, `high`; NaN with one value); where it is one of `family` intervals that
    hold together 95 times in 100 (family-wise, Bonferroni: `mean_difference`), each is wider."""

    value: float
    low: float
    high: float
    n: int
    family: int = 1

    @property
    def has_interval(self) -> bool:
        return self.n > 1 and math.isfinite(self.low) and math.isfinite(self.high)

    def excludes(self, x: float = 1.0) -> bool:
        """Whether the interval lies wholly above or below `x` (False without an interval)."""
        return self.has_interval and (self.low > x or self.high < x)


def estimate(values: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The median of positive `values` with its 95 % interval (see the module's doc)."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if not len(x):
        return Estimate(math.nan, math.nan, math.nan, 0)
    if (x <= 0).any():
        raise ValueError(f"an estimate needs positive values, got {x.min()}")
    median = float(np.median(x))
    if len(x) < 2:
        return Estimate(median, math.nan, math.nan, 1)
    if len(x) >= ORDER_STATISTICS_FROM:
        ci = stats.quantile_test(x, p=0.5).confidence_interval(confidence)
        return Estimate(median, float(ci.low), float(ci.high), len(x))
    low, high = _t_interval(np.log(x), confidence)
    return Estimate(median, math.exp(low), math.exp(high), len(x))


def median_interval(n: int, confidence: float = CONFIDENCE) -> tuple[int, int, float]:
    """For `n` >= ORDER_STATISTICS_FROM values: the ranks (1 = the smallest) of the two order
    statistics `estimate` gives as the interval of their median, and how often such an interval
    holds the true median, exactly (binomial: it needs no shape of the noise): at 6 values the
    smallest to the largest, 96.9 %."""
    ci = stats.quantile_test(np.arange(1.0, n + 1), p=0.5).confidence_interval(confidence)
    low, high = int(ci.low), int(ci.high)
    coverage = float(stats.binom.cdf(high - 1, n, 0.5) - stats.binom.cdf(low - 1, n, 0.5))
    return low, high, coverage


def values_to_narrow(n: int) -> int:
    """The fewest values, more than `n`, whose median's interval (`estimate`) can be narrower
    than that of `n`: the next one below ORDER_STATISTICS_FROM (a t-interval narrows with each),
    from there on the next count whose interval leaves out one more value on each side
    (`median_interval`): 6, 7 and 8 values give their smallest to their largest, which more values
    can only widen, 9 the second smallest to the second largest. So from 5 values it is 9: the
    range of 6 normal values reaches as far as the t-interval of 5 on average (about 1.27 and 1.2
    standard deviations either side), that of 7 or 8 further."""
    if n + 1 < ORDER_STATISTICS_FROM:
        return n + 1

    def left_out(m: int) -> int:
        low, high, _ = median_interval(m)
        return min(low - 1, m - high)

    start = left_out(n) if n >= ORDER_STATISTICS_FROM else 0
    m = max(n + 1, ORDER_STATISTICS_FROM)
    while left_out(m) <= start:
        m += 1
    return m


def _t_interval(x: np.ndarray, confidence: float) -> tuple[float, float]:
    """Student's t-interval of the mean of two or more values (the mean itself without spread)."""
    spread = x.std(ddof=1) / math.sqrt(len(x))
    if spread == 0:
        return float(x.mean()), float(x.mean())
    low, high = stats.t.interval(confidence, len(x) - 1, loc=x.mean(), scale=spread)
    return float(low), float(high)


def ratio_estimate(ratios: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The median of positive per-pair `ratios` with the 95 % interval a rerun's median falls
    in (see the module's doc): `estimate`'s interval, its two sides' mean reach in logarithms
    times √2, either side of the median."""
    e = estimate(ratios, confidence)
    if not e.has_interval:
        return e
    reach = RERUN * math.log(e.high / e.low) / 2
    return Estimate(e.value, e.value * math.exp(-reach), e.value * math.exp(reach), e.n)


def with_earlier_runs(e: Estimate, earlier: Sequence[Estimate],
                      other_codes: Sequence[Sequence[Estimate]] = (),
                      confidence: float = CONFIDENCE) -> tuple[Estimate, tuple[int, ...]]:
    """`e`, a ratio's estimate with its PI, judged against the estimates (with their own PIs)
    `earlier` runs of the same cases on the same machine and code gave, and the runs of them
    at each other code (`other_codes`, a group per code). Each PI gives its run's standard
    error in logarithms (half its width over z √2); what a code's runs' estimates scatter
    beyond those errors (their variance less the errors' mean square) is the host's difference
    between runs, pooled over the codes by their degrees of freedom (a code's level is its
    own: only runs of one code are compared), none if negative; a rerun's estimate less this
    one's has twice the sum of that and this run's own error. Two degrees of freedom at least
    (three runs of one code, or two of each of two). Where that PI is wider than `e`'s: it,
    and how many runs of each group it compared (this code's first, `e` among them; 0 for a
    group of fewer than two runs with PIs); else `e` as it is and ()."""
    if not e.has_interval or e.low <= 0:
        return e, ()
    z = float(stats.norm.ppf(0.5 + confidence / 2))

    def error(r: Estimate) -> float:
        return math.log(r.high / r.low) / 2 / (z * RERUN)

    compared = []
    excess = 0.0
    for group in ((*earlier, e), *other_codes):
        runs = [r for r in group if r.has_interval and r.low > 0]
        compared.append(len(runs) if len(runs) >= 2 else 0)
        if len(runs) >= 2:
            variance = float(np.var(np.log([r.value for r in runs]), ddof=1))
            excess += (len(runs) - 1) * (variance - float(np.mean([error(r) ** 2 for r in runs])))
    freedom = sum(max(0, n - 1) for n in compared)
    if freedom < 2:
        return e, ()
    reach = z * RERUN * math.sqrt(error(e) ** 2 + max(0.0, excess / freedom))
    if reach <= math.log(e.high / e.low) / 2 + 1e-12:
        return e, ()
    return (Estimate(e.value, e.value * math.exp(-reach), e.value * math.exp(reach), e.n),
            tuple(compared))


def _pair_variance(earlier: Sequence[Estimate], confidence: float) -> tuple[float, int] | None:
    """The variance in logarithms of one pair's ratio, as the PIs of `earlier` runs give it,
    and how many runs gave it: each PI's reach in logarithms over √2 (a rerun's) and over how
    far its pairs' median interval reaches in their standard deviations (`_half_in_sds`: t
    below 6 pairs, order statistics from 6) is one pair's standard deviation in that run; their
    mean square. None with fewer than two runs of two or more pairs with PIs."""
    runs = [r for r in earlier if r.has_interval and r.low > 0 and r.n >= 2]
    if len(runs) < 2:
        return None
    sds = [math.log(r.high / r.low) / 2 / (RERUN * _half_in_sds(r.n, confidence)) for r in runs]
    return float(np.mean(np.square(sds))), len(runs)


def with_machine_scale(e: Estimate, earlier: Sequence[Estimate],
                       confidence: float = CONFIDENCE) -> tuple[Estimate, int]:
    """`e`, a ratio's estimate with its PI over `e.n` pairs, no narrower than the PI that many
    pairs give where one pair's ratio scatters as in the `earlier` runs of the same case on the
    same machine, at any code (`_pair_variance`): the median of few pairs can be narrow by
    chance (9 whose second smallest and second largest happen to lie close), and a rerun then
    falls outside it. Where that PI is wider than `e`'s, it and the number of earlier runs that
    gave the scatter; else `e` as it is and 0."""
    found = _pair_variance(earlier, confidence)
    if found is None or not e.has_interval or e.n < 2:
        return e, 0
    reach = RERUN * _half_in_sds(e.n, confidence) * math.sqrt(found[0])
    if reach <= math.log(e.high / e.low) / 2 + 1e-12:
        return e, 0
    return (Estimate(e.value, e.value * math.exp(-reach), e.value * math.exp(reach), e.n),
            found[1])


def pairs_within(within: float, earlier: Sequence[Estimate],
                 confidence: float = CONFIDENCE, most: int = 1000) -> int:
    """The fewest pairs whose PI `with_machine_scale` leaves within ±`within` at the pair
    scatter of `earlier` runs (at most `most`); 0 without two of them."""
    found = _pair_variance(earlier, confidence)
    if found is None:
        return 0
    sd = math.sqrt(found[0])
    return next((n for n in range(2, most) if RERUN * _half_in_sds(n, confidence) * sd
                 <= math.log(1 + within)), most)


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float],
                 confidence: float = CONFIDENCE) -> Estimate:
    """The ratio of two sides measured in pairs (round by round): one ratio per pair, then
    their `ratio_estimate`. Pairs with a missing side are dropped."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)
              if a is not None and b is not None
              and math.isfinite(a) and math.isfinite(b) and b > 0]
    return ratio_estimate(ratios, confidence)


def turn_ratios(turns: Sequence[float | None], reference_turns: Sequence[float | None]
                ) -> list[float]:
    """The ratios of two processes' turns' medians, turn by turn, where both took the same
    number of turns (harness.run.processes.run_turns); none otherwise."""
    if len(turns) != len(reference_turns):
        return []
    return [a / b for a, b in zip(turns, reference_turns, strict=True)
            if a is not None and b is not None and a > 0 and b > 0]


def round_ratio(median: float, reference: float, turns: Sequence[float | None] = (),
                reference_turns: Sequence[float | None] = ()) -> float:
    """One round's ratio of two processes' step times: of their medians, or, where the two took
    turns, the median of their `turn_ratios`: two turns next to each other in time saw the host
    at the same speed, so a slow second cancels in each ratio, where it moves one of the two
    medians only."""
    ratios = turn_ratios(turns, reference_turns)
    if ratios:
        return float(np.median(ratios))
    return median / reference if reference and reference > 0 else math.nan


def unpaired_ratio(numerators: Sequence[float], denominators: Sequence[float],
                   confidence: float = CONFIDENCE) -> Estimate:
    """The ratio of the geometric means of two independent samples (no pairing, e.g. two stores
    measured on different days), with the interval a rerun's ratio falls in: Welch's t-interval
    of the difference of their log means, √2 times as wide (as `ratio_estimate`'s)."""
    a, b = (np.log(np.asarray(v, dtype=float)) for v in (numerators, denominators))
    if not len(a) or not len(b):
        return Estimate(math.nan, math.nan, math.nan, 0)
    value = float(np.exp(a.mean() - b.mean()))
    if min(len(a), len(b)) < 2:
        return Estimate(value, math.nan, math.nan, min(len(a), len(b)))
    if a.std() == 0 and b.std() == 0:
        return Estimate(value, value, value, min(len(a), len(b)))
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(confidence)
    reach = RERUN * (ci.high - ci.low) / 2
    log_value = a.mean() - b.mean()
    return Estimate(value, math.exp(log_value - reach), math.exp(log_value + reach),
                    min(len(a), len(b)))


def mean_difference(differences: Sequence[float], confidence: float = CONFIDENCE,
                    family: int = 1) -> Estimate:
    """The mean of paired `differences` (one per seed: the same weights and batches on both
    sides) with Student's t-interval, so that a difference is judged against the spread that
    seeds alone give; no interval from one value. For accuracy, whose differences may be
    negative and whose seeds are few. As one of `family` comparisons (a report's), the
    interval is at 1 - (1 - `confidence`) / `family` (Bonferroni), so that all of them hold
    together at `confidence`: among 23 comparisons one would otherwise look decided by chance."""
    x = np.asarray([d for d in differences if d is not None and math.isfinite(d)], dtype=float)
    if not len(x):
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if len(x) < 2:
        return Estimate(mean, math.nan, math.nan, 1)
    each = 1 - (1 - confidence) / max(1, family)
    return Estimate(mean, *_t_interval(x, each), len(x), max(1, family))


def summary_difference(mean: float, sd: float, n: int, other_mean: float, other_sd: float,
                       other_n: int, confidence: float = CONFIDENCE) -> Estimate:
    """`mean` - `other_mean` of two independent samples known only by their means, standard
    deviations and sizes (a published table's mean ± std over its runs), with Welch's
    t-interval; no interval below two values on either side."""
    difference = mean - other_mean
    if n < 2 or other_n < 2 or not (math.isfinite(sd) and math.isfinite(other_sd)):
        return Estimate(difference, math.nan, math.nan, 1)
    a, b = sd ** 2 / n, other_sd ** 2 / other_n
    if a + b == 0:
        return Estimate(difference, difference, difference, n + other_n)
    df = (a + b) ** 2 / (a ** 2 / (n - 1) + b ** 2 / (other_n - 1))
    reach = float(stats.t.ppf(0.5 + confidence / 2, df)) * math.sqrt(a + b)
    return Estimate(difference, difference - reach, difference + reach, n + other_n)


def format_difference(e: Estimate, words: tuple[str, str] = ("higher", "lower"),
                      undecidable_beyond: float | None = None) -> str:
    """'+3.10 (95% CI +1.20 to +5.00) higher'; '≈ +1.20 (95% CI -2.10 to +4.50)' when the
    interval holds 0 (no difference beyond what the seeds give); '+10.30 (one seed: no verdict)';
    one of a family of 23: '(95% CI of 23 comparisons -2.10 to +4.50)'. An interval that holds 0
    and reaches beyond ±`undecidable_beyond` decides nothing: 'undecidable with 3 seeds: ...'.
    words = (above 0, below 0)."""
    if not math.isfinite(e.value):
        return "-"
    if not e.has_interval:
        return f"{e.value:+.2f} (one seed: no verdict)"
    family = f" of {e.family} comparisons" if e.family > 1 else ""
    text = f"{e.value:+.2f} (95% CI{family} {e.low:+.2f} to {e.high:+.2f})"
    if e.low <= 0 <= e.high:
        if undecidable_beyond is not None and max(-e.low, e.high) > undecidable_beyond:
            return f"undecidable with {e.n} seeds: {text}"
        return f"≈ {text}"
    return f"{text} {words[0] if e.low > 0 else words[1]}"


def cv(values: Sequence[float]) -> float:
    """The coefficient of variation (standard deviation over mean; NaN below two values)."""
    x = np.asarray(values, dtype=float)
    return float(x.std(ddof=1) / x.mean()) if len(x) > 1 else math.nan


def ratio_half_width(n: int, spread: float, confidence: float = CONFIDENCE) -> float:
    """The typical relative half-width of the interval `paired_ratio` gives over `n` pairs, if
    each process's time scattered independently with log standard deviation `spread` (e.g. the
    host's, drift.probe_spread): a ratio of two such processes scatters by √2 x spread, the
    median's interval is `estimate`'s, Student's t below 6 values, order statistics from 6
    (taken at their expected normal scores, Blom's approximation), and a rerun's interval √2
    times that. A rough guide: pairing cancels noise that both processes of a pair share, and
    processes may differ by more than the host."""
    return math.expm1(RERUN * _half_in_sds(n, confidence) * math.sqrt(2) * spread)


def _half_in_sds(n: int, confidence: float = CONFIDENCE) -> float:
    """How far the median's interval of `n` normal values (`estimate`'s) typically reaches either
    side, in their standard deviations: Student's t below 6 values, order statistics from 6
    (taken at their expected normal scores, Blom's approximation)."""
    if n < ORDER_STATISTICS_FROM:
        return float(stats.t.ppf(0.5 + confidence / 2, n - 1) / math.sqrt(n))
    ranks = stats.quantile_test(np.arange(n, dtype=float), p=0.5).confidence_interval(
        confidence)  # the interval's order statistics, as 0-based ranks
    low, high = (stats.norm.ppf((rank + 1 - 0.375) / (n + 0.25))
                 for rank in (ranks.low, ranks.high))
    return float((high - low) / 2)


def rounds_for(spread: float, half_width: float = 0.05, confidence: float = CONFIDENCE,
               most: int = 1000) -> int | None:
    """About how many paired processes (rounds x seeds) a ratio takes for its interval to lie
    within ±`half_width` at the host's `spread` (see `ratio_half_width`); None if more than
    `most` or the spread is unknown."""
    if not math.isfinite(spread):
        return None
    return next((n for n in range(2, most + 1)
                 if ratio_half_width(n, spread, confidence) <= half_width), None)


def format_processes_needed(spread: float, half_width: float = 0.05) -> str:
    """'about 56 paired processes (rounds x seeds) give a ratio a 95% PI of ±5 % at this spread'
    (`rounds_for`), for the lines that report a host's steadiness."""
    n = rounds_for(spread, half_width)
    return (f"{f'about {n}' if n else 'more than 1000'} paired processes (rounds x seeds) give a "
            f"ratio a 95% PI of ±{half_width:.0%} at this spread")


def half_width(e: Estimate) -> float:
    """How far the interval of `e` reaches from its value, relative, on the farther side (0.10:
    ±10 %); NaN without an interval."""
    if not e.has_interval or e.value <= 0:
        return math.nan
    return max(e.high / e.value - 1, 1 - e.low / e.value)


NARROW = 0.10  # a ratio's PI within ±10 % is narrow: what quick's rounds aim at (until_within)


def processes_to_narrow(e: Estimate, target: float = NARROW) -> int | None:
    """About how many paired processes in all would bring the interval of the ratio `e` (a
    `ratio_estimate`) within ±`target`, at the scatter its own interval shows (its log
    half-width over √2 and Student's t, times √n); None where unknown or more than 1000."""
    if not e.has_interval or e.low <= 0 or e.high <= e.low:
        return None
    scatter = math.log(e.high / e.low) / 2 / RERUN / stats.t.ppf(0.5 + CONFIDENCE / 2, e.n - 1) \
        * math.sqrt(e.n)
    return rounds_for(scatter / math.sqrt(2), target)  # rounds_for takes one process's spread


UNDECIDED_BEYOND = 0.25  # an interval that reaches further from its ratio decides nothing


def ratio_verdict(e: Estimate, words: tuple[str, str] = ("slower", "faster")) -> str:
    """What a ratio's interval decides: words[0] (above 1) or words[1] (below 1) where it
    excludes 1, '≈' where it holds 1 within ±25 %, 'undecided' where it holds 1 and reaches
    further (`UNDECIDED_BEYOND`), '' without an interval."""
    if not math.isfinite(e.value) or not e.has_interval:
        return ""
    if e.excludes(1.0):
        return words[0] if e.low > 1 else words[1]
    return "undecided" if half_width(e) > UNDECIDED_BEYOND else "≈"


def format_ratio(e: Estimate, words: tuple[str, str] = ("slower", "faster")) -> str:
    """'1.30x slower (95% PI 1.10-1.50)' (PI: where a rerun's ratio falls, `ratio_estimate`); a
    ratio below 1 as its inverse, as a reader says it: 0.62 (95% PI 0.58-0.66) is '1.61x faster
    (95% PI 1.52-1.72)'; '≈ 1.01x (95% PI 0.97-1.05)' when the interval holds 1; 'undecided:
    0.73x (95% PI 0.40-1.90; about 40 paired processes for ±10%)' when it holds 1 and reaches
    further than ±25 % (too wide to call it no difference); '0.62x (one round, no PI)' without an
    interval. The last three keep the ratio itself: they decide no direction. words = (above 1,
    below 1)."""
    if not math.isfinite(e.value):
        return "-"
    if not e.has_interval:
        return f"{e.value:.2f}x (one round, no PI)"
    verdict = ratio_verdict(e, words)
    if verdict == words[1]:  # below 1
        return f"{1 / e.value:.2f}x {verdict} (95% PI {1 / e.high:.2f}-{1 / e.low:.2f})"
    if verdict == words[0]:
        return f"{e.value:.2f}x {verdict} (95% PI {e.low:.2f}-{e.high:.2f})"
    if verdict == "undecided":
        n = processes_to_narrow(e)
        more = f"about {n}" if n else "more than 1000"
        return (f"undecided: {e.value:.2f}x (95% PI {e.low:.2f}-{e.high:.2f}; {more} paired "
                f"processes for ±10%)")
    return f"≈ {e.value:.2f}x (95% PI {e.low:.2f}-{e.high:.2f})"


def format_value(e: Estimate, scale: float = 1.0, digits: int = 2) -> str:
    """'9.12 (95% CI 8.95-9.30)' with values times `scale`; just the value without an interval."""
    if not math.isfinite(e.value):
        return "-"
    value = f"{scale * e.value:.{digits}f}"
    if not e.has_interval:
        return value
    return f"{value} (95% CI {scale * e.low:.{digits}f}-{scale * e.high:.{digits}f})"
