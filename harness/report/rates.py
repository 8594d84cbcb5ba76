"""A learning-rate grid search by cross-validation, as the circles study ran it: a suite with
folds whose sweep lists several `lr` values. Each model and framework keeps the rate whose
first repetition (the lowest seed's k folds: one k-fold cross-validation) reached the best mean
accuracy on the held-out folds; the report then shows every repetition at that rate."""
from __future__ import annotations

import pandas as pd

from .. import tables
from . import frames


def is_rate_search(data: frames.SuiteData) -> bool:
    """Whether the suite is a grid search: cross-validation over several learning rates."""
    return data.has_folds and "lr" in data.swept


def rate_grid(data: frames.SuiteData) -> pd.DataFrame:
    """Per model, framework and learning rate: the held-out accuracy in percent after the last
    epoch over the first seed's folds (`mean`, `std`, `n`), and `chosen`, true on the rate with
    the best mean of its model and framework (the smallest rate on a tie)."""
    last = tables.final_epoch(data.epochs)
    ok = data.ok.assign(test_pct=100 * data.ok["key"].map(last["test_acc"]))
    first = ok[ok["seed"] == ok.groupby(["model", "framework"])["seed"].transform("min")]
    grid = (first.groupby(["model", "framework", "lr"], sort=False)["test_pct"]
            .agg(mean="mean", std="std", n="size").reset_index()
            .sort_values(["model", "framework", "lr"], kind="stable", ignore_index=True))
    best = grid.sort_values(["mean", "lr"], ascending=[False, True], kind="stable").groupby(
        ["model", "framework"], sort=False).head(1).index
    grid["chosen"] = grid.index.isin(best)
    return grid


def at_chosen_rates(data: frames.SuiteData, grid: pd.DataFrame) -> frames.SuiteData:
    """`data` restricted to each model and framework's chosen rate: an ordinary cross-validation
    suite, for the tables and figures."""
    chosen = grid[grid["chosen"]].set_index(["model", "framework"])["lr"]

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        index = pd.MultiIndex.from_frame(frame[["model", "framework"]])
        return frame[frame["lr"].to_numpy() == chosen.reindex(index).to_numpy()]

    cases = keep(data.cases)
    return frames.SuiteData.from_frames(cases, data.epochs, data.batches, data.steps, data.runs)


def rate_search_section(grid: pd.DataFrame, data: frames.SuiteData) -> list[str]:
    """The grid as a table, a row per model and framework, a column per rate: the mean ± std of
    the held-out accuracy over the first repetition's folds, the chosen rate marked."""
    rates = sorted(grid["lr"].unique())
    cells = grid.set_index(["model", "framework", "lr"])
    rows = []
    for (model, framework), group in grid.groupby(["model", "framework"], sort=False):
        row = [str(model), str(framework)]
        for lr in rates:
            if (model, framework, lr) not in cells.index:
                row.append("-")
                continue
            cell = cells.loc[(model, framework, lr)]
            text = tables.mean_std(pd.Series({"acc": cell["mean"], "acc_std": cell["std"]}),
                                   "acc", 1)
            row.append(f"**{text}**" if cell["chosen"] else text)
        row.append(f"{group.loc[group['chosen'], 'lr'].iloc[0]:g}")
        rows.append(row)
    folds = int(grid["n"].max())
    total = len(data.ok)
    headers = ["Model", "Framework", *(f"lr {lr:g}" for lr in rates), "Chosen lr"]
    return ["## Learning-rate search", "",
            f"A rate per model and framework, chosen as the circles study chose it: a grid "
            f"search with {folds}-fold cross-validation. Each cell is the accuracy (%) on the "
            f"held-out fold after the last epoch, mean ± std over the {folds} folds of the first "
            f"repetition (seed); bold: the best mean, the rate every table and figure below "
            f"shows, with all repetitions. The chosen rate's first repetition thus both chose it "
            f"and is reported, as in the study, whose second cross-validation ran on the same "
            f"data. {total} runs in all, of which the rates not chosen are shown only here.", "",
            tables.markdown_table(headers, rows), ""]
