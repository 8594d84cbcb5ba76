"""Our results beside the published numbers of the studies this project grew from.

Absolute times and bytes come from other machines, languages and protocols, so a study is
compared as ratios to its reference framework (PyTorch) and ours to torch; accuracies are shown
as they are, with the protocol differences that explain a gap stated under each table.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from harness.contract.data import circles
from harness.contract.frameworks.base import THROUGH_PRIMITIVES
from harness.measure.stats import Estimate, format_difference, format_ratio, summary_difference
from harness.report import frames
from harness.report.setup import clipping_words, model_specs, optimizer_words
from harness.results import estimates, tables
from harness.results.markdown import markdown_table

REFERENCE = "torch"


@dataclass(frozen=True)
class Published:
    """One contestant's row of a study's table: None where the study reports no number."""

    contestant: str
    ours: str | None  # our framework that plays its part, if any
    time_s: float | None
    alloc_gib: float | None
    test_pct: float | None


@dataclass(frozen=True)
class Study:
    """A study's table of time, bytes allocated and test accuracy for one of our models."""

    title: str
    model: str
    rows: tuple[Published, ...]  # the last is the reference (PyTorch)
    protocol: str  # the study's protocol in a sentence: dataset, epochs, batch, optimizer, ...
    measures: str  # what its time and memory measure, against ours
    dataset: str  # what it trained on, for the section's opening
    citation: str  # authors, title, where and when, as the study gives them


JULIA_CNN = Study(
    "Julia CNN study, Table I", "cnn",
    (Published("own engine (Julia)", "engine-static", 168.7, 250.632, 95.59),
     Published("Flux (Julia)", None, 33.5, 15.80, 94.67),
     Published("PyTorch (Python)", REFERENCE, 36.9, None, 94.59)),
    "MNIST; a CNN of convolution, pooling and dense layers whose sizes the text does not give; "
    "the number of epochs, the batch size and the optimizer are not stated; the own engine "
    "builds its graph once (our engine-static), in Julia, as Flux; PyTorch in Python",
    "Time: seconds as its Table I gives them (what they span is not stated). Memory: "
    "allocations in GiB, PyTorch's not reported; we take them for bytes allocated in total, "
    "Julia's usual count and the kind of number our memray pass gives", "MNIST",
    "D. Stańkowski and T. Gryczka, \"Implementation of Automatic Differentiation in Julia\", "
    "Warsaw University of Technology, undated (its references accessed in March 2024)")

JULIA_RNN = Study(
    "Julia RNN study, Tables I-III", "rnn",
    (Published("own engine (Julia)", "engine-static", 11.53, 4.59, 92.24),
     Published("Flux (Julia)", None, 12.78, 13.16, 94.4),
     Published("PyTorch (Python)", REFERENCE, 11.88, 31.57, 94.55)),
    "MNIST, 5 epochs of 600 batches of 100 images; a recurrent network with a dense output, "
    "trained by SGD through time, Glorot initialisation, its own library in float32; the "
    "hidden size, learning rate and momentum are not stated; the graph built once (our "
    "engine-static)",
    "Time: 5 epochs of training in seconds. Memory: bytes allocated in total, from Julia's "
    "counter for the Julia solutions and from the PyTorch Profiler for PyTorch (different "
    "counters; ours is memray's for every framework)", "MNIST",
    "M. Ankiersztajn and P. Tęcza, \"Performant and Accurate Automatic Differentiation In "
    "Julia for Recurrent Neural Networks\", Warsaw University of Technology, undated (its "
    "references accessed in May and June 2024)")

# Train and test accuracy (%), mean and std over 2 x 5-fold cross-validation, per model of the
# study (its Table I gives fractions: 0.983 ± 0.00419).
CIRCLES_RUNS = 10
CIRCLES_PUBLISHED = {
    "circles-tanh": ((98.3, 0.419), (96.9, 0.811)),
    "circles-tanh-clipped": ((98.5, 0.560), (97.0, 0.846)),
    "circles-relu": ((97.6, 1.35), (96.5, 2.49)),
    "circles-relu-clipped": ((96.8, 1.25), (96.4, 1.41)),
    "circles-sigmoid": ((98.0, 0.581), (97.0, 1.45)),
    "circles-sigmoid-clipped": ((97.0, 1.10), (96.0, 1.24)),
}
CIRCLES_PROTOCOL = (
    "The Python circles study, Table I: 10,000 points, 3 hidden layers of 25, MSE loss, its own "
    "framework on torch tensors fed one sample at a time (batch 1), a learning rate per model "
    "chosen by grid search with 5-fold cross-validation, then 5-fold cross-validation run twice; "
    "its optimizer and epochs are not stated")

CIRCLES_CITATION = (
    "E. Salimbeni, M. Zeller and F. Mutlu, \"Deep Learning Project 2: Automatic "
    "Differentiation\", EPFL, undated (its newest reference from 2019)")

CIRCLES_DATASET = "its own circles dataset (10,000 points, 80/20)"

# What a table of this section supports, and what it does not: said under every study.
CONCLUSIONS = (
    "What this table supports: our engine's time and bytes against torch's, both measured here "
    "under one protocol (the interval is a rerun's), set beside the study's own engine against "
    "its PyTorch, on its machine. What it does not: how the study's engine or Flux would fare "
    "on this machine, or that ours is faster or slower than theirs (no two numbers here were "
    "measured together across the studies), or anything of accuracy beyond each side's own "
    "run, since {accuracy}")


PUBLISHED_RATIOS = ("Time vs PyTorch and Allocations vs PyTorch divide one published number by "
                    "another, with no interval: how much a rerun of either would vary is not "
                    "known, so a ratio near 1 decides nothing")


def _number(value: float | None, digits: int) -> str:
    return "not reported" if value is None else f"{value:.{digits}f}"


def _published_ratio(value: float | None, reference: float | None,
                     words: tuple[str, str]) -> str:
    if value is None or reference is None:
        return "-"
    return tables.relative_words(value / reference, words)


def _ours(summary: pd.DataFrame, framework: str | None, column: str) -> object:
    rows = summary[summary["framework"] == framework]
    return None if framework is None or rows.empty else rows.iloc[0][column]


def study_table(study: Study, summary: pd.DataFrame,
                dataset: str) -> tuple[list[str], list[list[str]]]:
    """The study's rows beside ours: the published time, allocations and test accuracy each
    with its ratio to PyTorch, and our framework in that role with its ratio to torch: like
    with like, the total training time's paired ratio with the 95 % interval a rerun's falls
    in (the study's time is its whole training), bytes allocated, and test accuracy on
    `dataset` (ours) beside the study's on MNIST; `summary` is estimates.model_summary of the
    study's model."""
    headers = ["Contestant", "Time (s)", "Time vs PyTorch", "Ours", "Ours: training time vs torch",
               "Allocations (GiB)", "Allocations vs PyTorch", "Ours: allocations vs torch",
               "Test accuracy on MNIST (%)", f"Ours: test accuracy on {dataset} (%)"]
    reference = study.rows[-1]
    rows = []
    for row in study.rows:
        ratio = _ours(summary, row.ours, "train_ratio")
        alloc = _ours(summary, row.ours, "alloc_gib_ratio")
        accuracy = _ours(summary, row.ours, "test_pct")
        is_reference = row.ours == REFERENCE
        rows.append([
            row.contestant, _number(row.time_s, 1),
            "reference" if row is reference else _published_ratio(
                row.time_s, reference.time_s, ("slower", "faster")),
            row.ours or "no counterpart",
            "reference" if is_reference else (
                format_ratio(ratio) if isinstance(ratio, Estimate) else "-"),
            _number(row.alloc_gib, 2),
            "reference" if row is reference else _published_ratio(
                row.alloc_gib, reference.alloc_gib, ("more", "less")),
            "reference" if is_reference else (
                tables.relative_words(float(alloc), ("more", "less"))
                if isinstance(alloc, float) else "-"),
            _number(row.test_pct, 2),
            f"{accuracy:.2f}" if isinstance(accuracy, float) and pd.notna(accuracy) else "-"])
    return headers, rows


def _our_protocol(data: frames.SuiteData, model: str) -> str:
    """Ours in the words of the study's protocol: the model's architecture, dataset, epochs,
    batch, optimizer with every setting (momentum where set), dtype, seeds and threads."""
    cases = data.ok[data.ok["model"] == model]
    first = cases.iloc[0]
    specs = model_specs(cases)
    architecture = f"{specs[0].description}; " if specs else ""
    return (f"ours: {architecture}{', '.join(map(str, dict.fromkeys(cases['dataset'])))}, "
            f"{first['epochs']} epochs, batch {first['batch_size']}, {optimizer_words(cases)}"
            f"{clipping_words(specs[0] if specs else None)}, "
            f"{'/'.join(dict.fromkeys(cases['dtype']))}, {_seeds(cases['seed'].nunique())}, "
            f"numpy (the engine) and "
            f"torch in Python on this machine, {first['threads']} threads")


def _how_ours_differentiate(summary: pd.DataFrame) -> str:
    """How our contestants differentiated (each row's `differentiated`), and, where the engine
    fused a layer by hand, how its unrolled variant, through the engine's primitives as torch's
    autograd goes through its own, trains against torch: like for like beside the fused.
    `summary` is estimates.model_summary of one model."""
    ways = {fw: _ours(summary, fw, "differentiated") for fw in ("engine-static", REFERENCE)}
    said = ", ".join(f"{fw} {way}" for fw, way in ways.items() if isinstance(way, str) and way)
    said = said and f"; how ours differentiate: {said}"  # runs from before the record: nothing
    unrolled = _ours(summary, "engine-static-unrolled", "train_ratio")
    if ways["engine-static"] == THROUGH_PRIMITIVES or not isinstance(unrolled, Estimate):
        return said
    return (f"{said}; engine-static-unrolled, the same layer through the engine's primitives, "
            f"trains {format_ratio(unrolled)} than torch")


def _seeds(n: int) -> str:
    return f"{n} seed{'s' * (n != 1)}"


def _rates(data: frames.SuiteData) -> str:
    """The engine's 'lr 0.01 for every model', or each model's rate where they differ (a rate
    search chooses one per model and framework)."""
    engine = data.ok[data.ok["framework"] == "engine-static"]
    rates = engine.groupby("model", sort=False)["lr"].first()
    if rates.nunique() == 1:
        return f"lr {rates.iloc[0]:g} for every model"
    return "the rate chosen per model (" + ", ".join(
        f"{model.removeprefix('circles-')} {lr:g}" for model, lr in rates.items()) + ")"


def _updates(data: frames.SuiteData) -> str:
    """How many updates our runs made against the study's one per sample: what decides whether
    a slow learner (the unclipped sigmoid network) leaves its initial plateau in time."""
    first = data.ok.iloc[0]
    folds = int(first["extra_folds"])
    train = circles.N_POINTS * (folds - 1) // folds  # the study's 10,000 points, as ours
    ours = train // int(first["batch_size"]) * int(first["epochs"])
    return (f"Updates: the study made one per sample, {train:,} an epoch; ours {ours:,} in "
            f"all ({int(first['epochs'])} epochs of {train // int(first['batch_size']):,}). "
            f"Too few updates leave a slowly learning network on its initial plateau: with "
            f"1,600 (batch 100, 20 epochs) the unclipped sigmoid network ended 5 of 10 runs at "
            f"75-81 % held-out accuracy, with 16,000 (batch 10) all 10 between 95 and 99 % "
            f"(measured once for this project: the engine, Adam at lr 0.01, 2 x 5 folds).")


def circles_table(data: frames.SuiteData) -> tuple[list[str], list[list[str]]]:
    """The circles study's train and test accuracy per model (mean ± std over its 10 runs)
    beside ours (engine-static and torch, mean ± std over the folds and repetitions), and our
    test accuracy minus the study's with Welch's 95 % interval: '≈' where the two sides' spreads
    over folds hold 0."""
    ours = estimates.accuracy_summary(data.ok, data.epochs).set_index(["model", "framework"])
    frameworks = [f for f in ("engine-static", REFERENCE) if f in set(data.ok["framework"])]
    headers = ["Model", "Published train (%)", "Published test (%)",
               *(f"{f} {split}" for f in frameworks
                 for split in ("train (%)", "test (%)", "test - published (pp)"))]
    rows = []
    for model, (train, test) in CIRCLES_PUBLISHED.items():
        if model not in set(data.ok["model"]):
            continue
        cells = [model, f"{train[0]:.1f} ± {train[1]:.1f}", f"{test[0]:.1f} ± {test[1]:.1f}"]
        for framework in frameworks:
            if (model, framework) in ours.index:
                row = ours.loc[(model, framework)]
                cells += [tables.mean_std(row, "train_pct", 1), tables.mean_std(row, "test_pct", 1),
                          format_difference(_against_published(row, test))]
            else:
                cells += ["-", "-", "-"]
        rows.append(cells)
    return headers, rows


def _against_published(row: pd.Series, published: tuple[float, float]) -> Estimate:
    return summary_difference(float(row["test_pct"]), float(row["test_pct_std"]), int(row["n"]),
                              published[0], published[1], CIRCLES_RUNS)


def circles_ranking(data: frames.SuiteData, framework: str = "engine-static") -> str:
    """The study's ranking of the variants by test accuracy beside ours, and how many of the
    gaps between neighbours in ours the spread over folds decides (Welch's 95 % interval of
    the difference excludes 0): where none is, the order is the folds' chance, not a finding."""
    ours = estimates.accuracy_summary(data.ok, data.epochs).set_index(["model", "framework"])
    models = [m for m in CIRCLES_PUBLISHED if (m, framework) in ours.index]
    if len(models) < 2:
        return ""
    theirs = sorted(models, key=lambda m: -CIRCLES_PUBLISHED[m][1][0])
    mine = sorted(models, key=lambda m: -float(ours.loc[(m, framework), "test_pct"]))
    decided = 0
    for better, worse in zip(mine, mine[1:], strict=False):
        a, b = ours.loc[(better, framework)], ours.loc[(worse, framework)]
        gap = summary_difference(float(a["test_pct"]), float(a["test_pct_std"]), int(a["n"]),
                                 float(b["test_pct"]), float(b["test_pct_std"]), int(b["n"]))
        decided += gap.excludes(0.0)

    def order(ranked: list[str]) -> str:
        return " > ".join(m.removeprefix("circles-") for m in ranked)

    means = [CIRCLES_PUBLISHED[m][1][0] for m in theirs]
    gaps = [a - b for a, b in zip(means, means[1:], strict=False)]
    spreads = [CIRCLES_PUBLISHED[m][1][1] for m in theirs]
    return (f"Ranked by test accuracy, the study's variants: {order(theirs)}; ours "
            f"({framework}): {order(mine)}. {decided} of the {len(mine) - 1} gaps between "
            f"neighbours in our ranking exceed what the spread over folds gives (Welch's 95 % "
            f"interval of the difference excludes 0). The study's gaps between neighbours, "
            f"{min(gaps):.1f}-{max(gaps):.1f} points, are smaller than its own standard "
            f"deviations over its {CIRCLES_RUNS} runs ({min(spreads):.1f}-{max(spreads):.1f} "
            f"points): a ranking is a finding only where its gaps are decided, and a reversal "
            f"between two undecided rankings is within chance.")


def studies_section(data: frames.SuiteData) -> list[str]:
    """'Beside the published studies': a table per study whose model this suite ran with the
    engine and torch, each with the protocol differences; nothing for a suite with none."""
    lines: list[str] = []
    shown: list[Study] = []
    models = set(data.ok["model"])
    frameworks = set(data.ok["framework"])
    if data.swept or "engine-static" not in frameworks:
        return []
    if data.has_folds:
        headers, rows = circles_table(data)
        if rows:
            first = data.ok.iloc[0]
            lines += ["### Python circles study, Table I", "",
                      f"The study: {CIRCLES_CITATION}.", "",
                      markdown_table(headers, rows), "",
                      f"{CIRCLES_PROTOCOL}; ours (engine-static): {first['optimizer']} at "
                      f"{_rates(data)}, batch {first['batch_size']}, {first['epochs']} epochs, "
                      f"{data.ok['seed'].nunique()} x {int(first['extra_folds'])}-fold "
                      f"cross-validation on splits of our own. {_updates(data)}", "",
                      circles_ranking(data), ""]
    elif REFERENCE in frameworks:
        summary = data.summary()
        for study in (JULIA_CNN, JULIA_RNN):
            if study.model not in models:
                continue
            of_model = data.ok[data.ok["model"] == study.model]
            ours_on = "/".join(dict.fromkeys(of_model["dataset"]))
            headers, rows = study_table(study, summary[summary["model"] == study.model], ours_on)
            accuracy = ("the architectures and protocols differ" if ours_on == study.dataset
                        else f"the study trained on {study.dataset} and we on {ours_on}, with "
                        "architectures and protocols that differ")
            lines += [f"### {study.title}, beside our {study.model}", "",
                      f"The study: {study.citation}.", "",
                      markdown_table(headers, rows), "",
                      f"Protocol differences: the study: {study.protocol}; "
                      f"{_our_protocol(data, study.model)}"
                      f"{_how_ours_differentiate(summary[summary['model'] == study.model])}. "
                      f"{study.measures}. {PUBLISHED_RATIOS}.", "",
                      CONCLUSIONS.format(accuracy=accuracy) + ".", ""]
            shown.append(study)
    if not lines:
        return []
    by_dataset: dict[str, list[str]] = {}
    for study in shown:
        by_dataset.setdefault(study.dataset, []).append(study.title.split(",")[0])
    trained = ("The Python circles study trained on " + CIRCLES_DATASET if data.has_folds else
               "; ".join(f"the {' and the '.join(names)} trained on {dataset}"
                         for dataset, names in by_dataset.items()))
    return ["## Beside the published studies", "",
            "The studies' published numbers came from other machines, so times and bytes are "
            "compared as ratios to each study's reference (PyTorch), ours to torch on this "
            f"machine. {trained[0].upper()}{trained[1:]}.", "", *lines]
