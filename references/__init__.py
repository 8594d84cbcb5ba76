"""Reference frameworks: the same models as the engine, built from the same specs
(harness/contract/specs.py), loading the same initial weights and consuming the same batches."""
