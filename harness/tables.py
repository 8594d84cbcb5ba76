"""Tables in the papers' format, from the results store's data frames."""
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
    last = epochs.sort_values("epoch").groupby("key").tail(1)
    return last.set_index("key")["test_acc"]


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
    summary = grouped.mean().join(grouped.std(ddof=1), rsuffix="_std")
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
