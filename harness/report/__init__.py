"""The report: a suite's figures (PNG and PDF), tables (Markdown, LaTeX, CSV) and report.md.

    from harness.report import build_report
    build_report(ResultsStore("results/adh.sqlite"), "quick")  # writes reports/quick/

Modules: `style` (the look of every figure), `panels` (captions, panels, legends and axes every
figure shares), `frames` (the store's frames shaped for figures), `cost` (the dot plots of time,
memory and the ratios to torch) and `figures` (the others; one function per figure, each
returning a matplotlib Figure), `method`, `setup`, `parity`, `studies`, `rates`,
`roofline` (report.md's sections), `build` (what a suite gets, and report.md). Beside the report:
`history` (`adh history`), `publish` (the dashboard) and `ci_exports`. The tables' formats live
in `harness.results.tables`.
"""
from harness.report.build import build_report

__all__ = ["build_report"]
