"""The contract every framework meets, and what a case means.

The bottom of the harness's layers but `harness.measure` and `harness.errors`: a model's spec
(`specs`), its initial weights (`weights`), the datasets (`data`) and the batch order
(`batches`), what a step computes and counts (`metrics`, `flops`), a case's settings and the
arrays a worker trains on (`cases`), and the `Framework` an adapter implements, in Python or
through the process door (`frameworks`). Nothing here knows how a suite is run or how results
are kept.
"""
