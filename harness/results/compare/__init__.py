"""`adh compare BASE NEW`: did NEW make a case slower, hungrier or less accurate than BASE?

- `result_set`: what is compared (a results store, an exported folder, or the cases
  `harness.run.abtest` measured) and how cases are matched (by settings, not by key);
- `statistics`: the numbers behind the unpaired step-time verdict (spread, blocks, tests);
- `verdicts`: the thresholds, one row per matched case and metric with its verdict, and the
  exit code (1 on any regression);
- `format`: the rows as a Markdown table and as JSON.
"""
from harness.results.compare.format import summary, to_json, to_markdown
from harness.results.compare.result_set import ResultSet, load_result_set
from harness.results.compare.verdicts import (
           FAILING,
           VERDICTS,
           ComparisonRow,
           Thresholds,
           compare,
           exit_code,
)

__all__ = ["FAILING", "VERDICTS", "ComparisonRow", "ResultSet", "Thresholds", "compare",
           "exit_code", "load_result_set", "summary", "to_json", "to_markdown"]
