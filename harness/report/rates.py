"""A learning-rate grid search by cross-validation, as the circles study ran it: a suite with
folds whose sweep lists several `lr` values. Each model and framework keeps the rate whose
first repetition (the lowest seed's k folds: one k-fold cross-validation) reached the best mean
accuracy on the held-out folds, among the rates whose k folds all finished (a rate that
diverged in some folds must not win on the others); the report then shows every repetition at
that rate."""
from __future__ import annotations

import pandas as pd

from harness.report import frames
from harness.results import estimates, tables
from harness.results.markdown import markdown_table


def is_rate_search(data: frames.SuiteData) -> bool:
    """Whether the suite is a grid search: cross-validation over several learning rates."""
    return data.has_folds and "lr" in data.swept


def rate_grid(data: frames.SuiteData) -> pd.DataFrame:
    """Per model, framework and learning rate: the held-out accuracy in percent after the last
    epoch over the first seed's finished folds (`mean`, `std`, `n`), `folds` (the folds per
    repetition), and `chosen`, true on the rate with the best mean of its model and framework
    among those with all folds finished (the smallest rate on a tie; none chosen where no rate
    finished all). Models in the report's order."""
    ok = data.ok.assign(
        test_pct=100 * data.ok["key"].map(estimates.final_test_accuracy(data.epochs)))
    first = ok[ok["seed"] == ok.groupby(["model", "framework"])["seed"].transform("min")]
    grid = (first.groupby(["model", "framework", "lr"], sort=False)["test_pct"]
            .agg(mean="mean", std="std", n="size").reset_index())
    grid["folds"] = int(data.ok["extra_folds"].max())
    order = {model: i for i, model in enumerate(data.models)}
    grid = grid.sort_values(["model", "framework", "lr"], key=lambda c: c.map(order)
                            if c.name == "model" else c, kind="stable", ignore_index=True)
    complete = grid[grid["n"] == grid["folds"]]
    best = complete.sort_values(["mean", "lr"], ascending=[False, True], kind="stable").groupby(
        ["model", "framework"], sort=False).head(1).index
    grid["chosen"] = grid.index.isin(best)
    return grid


def at_chosen_rates(data: frames.SuiteData, grid: pd.DataFrame) -> frames.SuiteData:
    """`data` restricted to each model and framework's chosen rate: an ordinary cross-validation
    suite, for the tables and figures. A model and framework with no chosen rate (no rate
    finished every fold, or it never ran: unsupported, failed) keeps all its cases, so that the
    report still lists them where it lists what did not run."""
    chosen = grid[grid["chosen"]].set_index(["model", "framework"])["lr"]

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        rate = chosen.reindex(pd.MultiIndex.from_frame(frame[["model", "framework"]])).to_numpy()
        return frame[pd.isna(rate) | (frame["lr"].to_numpy() == rate)]

    return frames.SuiteData.from_frames(keep(data.cases), data.epochs, data.batches, data.steps,
                                        data.runs)


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
            if cell["n"] < cell["folds"]:
                text += f" ({cell['n']} of {cell['folds']} folds finished)"
            row.append(f"**{text}**" if cell["chosen"] else text)
        chosen = group.loc[group["chosen"], "lr"]
        row.append(f"{chosen.iloc[0]:g}" if len(chosen) else "none: no rate finished every fold")
        rows.append(row)
    folds = int(grid["folds"].max())
    total = len(data.cases)
    edge = grid[grid["chosen"] & grid["lr"].isin([rates[0], rates[-1]])] if len(rates) > 1 else []
    at_edge = ("" if not len(edge) else
               " At the grid's edge, where a better rate may lie beyond it (extend the grid "
               "there): " + ", ".join(f"{m} ({f}) at {lr:g}" for m, f, lr in
                                       edge[["model", "framework", "lr"]].itertuples(index=False))
               + ".")
    headers = ["Model", "Framework", *(f"lr {lr:g}" for lr in rates), "Chosen lr"]
    return ["## Learning-rate search", "",
            f"A rate per model and framework, chosen by a grid search with {folds}-fold "
            f"cross-validation, as the circles study chose its rates. Each cell is the accuracy "
            f"(%) on the held-out fold after the last epoch, mean ± std over the {folds} folds "
            f"of the first repetition (seed); bold: the best mean among the rates whose folds "
            f"all finished, the rate every table and figure below shows, with all repetitions. "
            f"The first repetition thus both chose the rate and is part of what is reported: a "
            f"small optimistic bias of selection, which a selection seed of its own would avoid. "
            f"{total} runs in all; those at the rates not chosen appear only here.{at_edge}", "",
            markdown_table(headers, rows), ""]
