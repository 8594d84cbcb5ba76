"""Running a suite: loading it (`suites`), planning it (`plan`, `probe`), running each case in
fresh worker processes (`runner`, `worker`), here, on a cluster (`cluster`, `shards`) or as two
commits side by side (`abtest`); and the other things that run frameworks: parity checks
(`check`) and profiles (`profile`). Writes into `harness.results`; nothing below imports it.
"""
