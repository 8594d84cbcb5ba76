"""Plain values that `adh`'s parsers print or default to and that the layers below use too,
here so that building the parsers (harness/commands/parsers/) imports nothing heavy: the
default results store, and what the columns of `adh check`'s table mean."""

DEFAULT_STORE = "results/adh.sqlite"  # where results are kept unless told (--store)

# What the columns of `adh check`'s table are, printed under it and in `adh check --help`.
CHECK_COLUMNS_NOTE = (
    "grad rho, weights rho: the largest rho(x, y) = |x - y| / max(1, |x| + |y|) over every entry "
    "of every parameter, the framework's against torch's (relative for large values, absolute "
    "near zero); loss rel diff: the largest relative difference of the loss over the steps; same "
    "preds: the test examples both models give the same class.")
