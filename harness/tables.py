"""Tables in the papers' format, from the results store's data frames, as Markdown and LaTeX (booktabs)."""
from __future__ import annotations

import pandas as pd

GIB, MIB = 2 ** 30, 2 ** 20


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table with aligned columns (readable in a terminal too)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def final_test_accuracy(epochs: pd.DataFrame) -> pd.Series:
    """Test accuracy after the last epoch, by case key."""
    return final_epoch(epochs)["test_acc"]


def model_summary(cases: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """Per model and framework over the finished cases (seeds): mean and std of total training
    time, bytes allocated, peak live bytes, final test accuracy, and median step time."""
    ok = cases[cases["status"] == "ok"].copy()
    ok["test_acc"] = ok["key"].map(final_test_accuracy(epochs))
    ok["time_s"] = ok["train_time_s"]
    ok["alloc_gib"] = ok["alloc_bytes"] / GIB
    ok["peak_mib"] = ok["peak_bytes"] / MIB
    ok["test_pct"] = 100 * ok["test_acc"]
    ok["step_ms"] = 1000 * ok["step_median_s"]
    metrics = ["time_s", "alloc_gib", "peak_mib", "test_pct", "step_ms"]
    grouped = ok.groupby(["model", "framework"], sort=False)[metrics]
    summary = grouped.mean().join(grouped.std(ddof=1).add_suffix("_std"))
    summary["n"] = grouped.size()
    return summary.reset_index()


def _mean_std(row: pd.Series, name: str, digits: int) -> str:
    mean, std = row[name], row[f"{name}_std"]
    if pd.isna(mean):
        return "-"
    return f"{mean:.{digits}f}" + ("" if pd.isna(std) else f" ± {std:.{digits}f}")


def format_model_tables(summary: pd.DataFrame, reference: str = "torch") -> str:
    """One table per model: Framework, Time (s), Allocations (GiB), Peak (MiB), Test accuracy (%),
    step time, and the time relative to the reference framework."""
    out = []
    for model, rows in summary.groupby("model", sort=False):
        ref = rows[rows["framework"] == reference]
        ref_time = ref["time_s"].iloc[0] if len(ref) else None
        table = []
        for _, row in rows.iterrows():
            ratio = "-" if not ref_time else f"{row['time_s'] / ref_time:.2f}x"
            table.append([row["framework"], _mean_std(row, "time_s", 2), _mean_std(row, "alloc_gib", 3),
                          _mean_std(row, "peak_mib", 1), _mean_std(row, "test_pct", 2),
                          _mean_std(row, "step_ms", 2), ratio, str(int(row["n"]))])
        headers = ["Framework", "Time (s)", "Allocations (GiB)", "Peak (MiB)", "Test accuracy (%)",
                   "Step (ms, median)", f"Time vs {reference}", "Seeds"]
        out.append(f"{model}\n{markdown_table(headers, table)}")
    return "\n\n".join(out)


# Columns of the papers' table: (summary column, header, digits, ratio words or None for a
# difference in percentage points). A ratio says "2.10× slower" rather than "2.10", so that a
# reader never has to guess which way it points.
PAPER_COLUMNS = [("time_s", "Time (s)", 2, ("slower", "faster")),
                 ("alloc_gib", "Allocations (GiB)", 3, ("more", "less")),
                 ("peak_mib", "Peak (MiB)", 1, ("more", "less")),
                 ("test_pct", "Test accuracy (%)", 2, None)]


def relative_to_reference(summary: pd.DataFrame, reference: str = "torch") -> pd.DataFrame:
    """`model_summary` plus, per model, each mean against the reference framework's:
    `<metric>_ratio` (framework / reference) for time and memory, `test_pct_diff` (percentage
    points) for accuracy; NaN where the model has no reference row."""
    out = summary.copy()
    ref = summary[summary["framework"] == reference].drop_duplicates("model").set_index("model")
    for column, _, _, words in PAPER_COLUMNS:
        base = out["model"].map(ref[column])
        if words:
            out[f"{column}_ratio"] = out[column] / base
        else:
            out[f"{column}_diff"] = out[column] - base
    return out


def relative_words(ratio: float, words: tuple[str, str]) -> str:
    """A ratio in words: 2.0 -> '2.00× slower', 0.5 -> '2.00× faster' (words = (above, below))."""
    if pd.isna(ratio) or ratio <= 0:
        return "-"
    return f"{ratio:.2f}× {words[0]}" if ratio >= 1 else f"{1 / ratio:.2f}× {words[1]}"


def _relative_cell(row: pd.Series, column: str, words: tuple[str, str] | None, reference: str) -> str:
    if row["framework"] == reference:
        return "reference"
    if words:
        return relative_words(row[f"{column}_ratio"], words)
    diff = row[f"{column}_diff"]
    return "-" if pd.isna(diff) else f"{diff:+.2f}"


def paper_table(rows: pd.DataFrame, reference: str = "torch") -> tuple[list[str], list[list[str]]]:
    """One model's rows of `relative_to_reference` as the papers' table: each metric as mean ±
    std over seeds, followed by its value against the reference when the model has a reference
    row. A metric no row measured (no memory pass) is left out."""
    relative = bool((rows["framework"] == reference).any())
    columns = [c for c in PAPER_COLUMNS if rows[c[0]].notna().any()]
    headers = ["Framework"]
    for _, header, _, words in columns:
        headers += [header, f"vs {reference}" + ("" if words else " (pp)")] if relative else [header]
    body = []
    for _, row in rows.iterrows():
        cells = [row["framework"]]
        for column, _, digits, words in columns:
            cells.append(_mean_std(row, column, digits))
            if relative:
                cells.append(_relative_cell(row, column, words, reference))
        body.append(cells + [str(int(row["n"]))])
    return headers + ["Seeds"], body


def final_epoch(epochs: pd.DataFrame) -> pd.DataFrame:
    """The last epoch's row of every case, indexed by case key."""
    return epochs.sort_values("epoch").groupby("key").tail(1).set_index("key")


def accuracy_summary(cases: pd.DataFrame, epochs: pd.DataFrame) -> pd.DataFrame:
    """Per model and framework over the finished cases (seeds, folds): mean and std of the
    final training and test accuracy in percent (`train_pct`, `test_pct`, `*_std`) and `n`."""
    ok = cases[cases["status"] == "ok"]
    last = final_epoch(epochs)
    frame = pd.DataFrame({"model": ok["model"].to_numpy(), "framework": ok["framework"].to_numpy(),
                          "train_pct": 100 * ok["key"].map(last["train_acc"]).to_numpy(),
                          "test_pct": 100 * ok["key"].map(last["test_acc"]).to_numpy()})
    grouped = frame.groupby(["model", "framework"], sort=False)[["train_pct", "test_pct"]]
    summary = grouped.mean().join(grouped.std(ddof=1).add_suffix("_std"))
    summary["n"] = grouped.size()
    return summary.reset_index()


def accuracy_table(summary: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """`accuracy_summary` as a table: Model, Framework, Train and Test accuracy (%) as mean ±
    std, and the number of runs (folds x repetitions)."""
    headers = ["Model", "Framework", "Train accuracy (%)", "Test accuracy (%)", "Runs"]
    rows = [[row["model"], row["framework"], _mean_std(row, "train_pct", 2),
             _mean_std(row, "test_pct", 2), str(int(row["n"]))] for _, row in summary.iterrows()]
    return headers, rows


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}", "±": r"$\pm$", "×": r"$\times$"}


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped, and ± and × as math symbols."""
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in str(text))


def latex_table(headers: list[str], rows: list[list[str]], caption: str = "", label: str = "",
                left: int = 1) -> str:
    """A booktabs table (\\usepackage{booktabs}): the first `left` columns (names) left-aligned,
    the numbers right-aligned."""
    line = lambda cells: " & ".join(latex_escape(c) for c in cells) + r" \\"
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [r"\begin{tabular}{" + "l" * left + "r" * (len(headers) - left) + "}", r"\toprule", line(headers),
              r"\midrule", *map(line, rows), r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def sweep_table(points: pd.DataFrame, column: str, header: str,
                frameworks: list[str]) -> tuple[list[str], list[list[str]]]:
    """Step time against a swept setting: one row per model and value of `column`, one column
    per framework with the median step time in ms and its interquartile range in brackets.
    `points` has model, framework, `column`, median, q1, q3 (seconds)."""
    headers = ["Model", header, *(f"{f} (ms)" for f in frameworks)]
    cells = {(r["model"], r[column], r["framework"]):
             f"{1000 * r['median']:#.3g} [{1000 * r['q1']:#.3g}, {1000 * r['q3']:#.3g}]"
             for _, r in points.iterrows()}
    rows = [[model, f"{value:g}", *(cells.get((model, value, f), "-") for f in frameworks)]
            for (model, value) in points[["model", column]].drop_duplicates().itertuples(index=False)]
    return headers, rows
