"""The statistics behind the unpaired step-time verdict: the steps' spread, blocks of consecutive
steps that can count as independent samples, and the two tests of a shift between BASE and NEW.

Each argument `runs` is a list of runs, each run its step times in order (one process each).
Ratios and their 95 % intervals come from `harness.measure.stats`.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import mannwhitneyu, rankdata, ttest_ind


def spread(steps: np.ndarray) -> float:
    """Interquartile range over median: how unsteady the steps were."""
    q1, median, q3 = np.percentile(steps, [25, 50, 75])
    return float((q3 - q1) / median)


def block_size(runs: list[np.ndarray]) -> int:
    """Steps per block, so that the medians of consecutive blocks are about independent: twice
    the integrated autocorrelation time of an AR(1) process with the runs' lag-1 autocorrelation.

    Consecutive steps are autocorrelated (caches, CPU frequency and the neighbours' load persist
    over several steps), and Mann-Whitney U on steps counted as independent would call a change
    in identical code far more often than its level says. The autocorrelation is that of ranks,
    so that one slow outlier step does not dominate; it is pooled over runs, with blocks kept
    within a run (each run is its own process), and corrected for its downward bias in short
    series (Marriott & Pope: about -(1 + 4 rho) / n). The runs' common course (the first steps
    after warm-up are slower) is not noise that differs between the sides, so it is taken out
    first: the median over runs of each step index."""
    padded = np.full((len(runs), max(map(len, runs))), np.nan)
    for i, run in enumerate(runs):
        padded[i, :len(run)] = run
    common = np.nanmedian(padded, axis=0) if len(runs) > 1 else np.zeros(padded.shape[1])
    num = den = 0.0
    for run in runs:
        centred = rankdata(run - common[:len(run)]) - (len(run) + 1) / 2
        num, den = num + centred[1:] @ centred[:-1], den + centred @ centred
    if not den:
        return 1
    rho = num / den
    rho += (1 + 4 * max(rho, 0.0)) / (sum(map(len, runs)) / len(runs))
    rho = min(max(rho, 0.0), 0.9)
    return math.ceil(2 * (1 + rho) / (1 - rho))


def block_medians(runs: list[np.ndarray], size: int) -> np.ndarray:
    """Medians of consecutive blocks of `size` steps within each run (a short tail is dropped)."""
    return np.concatenate([np.median(r[:len(r) // size * size].reshape(-1, size), axis=1)
                           for r in runs])


def blocks_p_value(base_blocks: np.ndarray, new_blocks: np.ndarray) -> float:
    """Two-sided Mann-Whitney U of the block medians: is a step of one side typically slower?"""
    return float(mannwhitneyu(base_blocks, new_blocks, alternative="two-sided").pvalue)


def runs_p_value(base_runs: list[np.ndarray], new_runs: list[np.ndarray]) -> float:
    """Welch's t-test on the runs' log medians (at least two runs a side): does a shift hold from
    process to process? Blocks within runs cannot see that a process as a whole runs slow."""
    log_medians = [np.log([np.median(run) for run in runs]) for runs in (base_runs, new_runs)]
    p_value = float(ttest_ind(*log_medians, equal_var=False).pvalue)
    return 0.0 if np.isnan(p_value) else p_value  # identical runs on each side: no spread
