"""c-dense: a dense-network engine in C, benchmarked by autodiff-harness through its process door
(docs/process-protocol.md). The adapter is c_dense.adapter.CDense; the engine is engine.c."""
