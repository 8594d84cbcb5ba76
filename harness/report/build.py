"""`build_report`: a suite's figures, tables and report.md, from the results store.

Which figures a suite gets depends on its data: a plain suite (quick, paper) gets the learning
curves, the ratios to torch, the time, memory and time-to-accuracy figures (1-5, 7); a sweep
suite (scaling) the cost-growth figures (6); a cross-validation suite (circles) the ratios, time
and memory and the circles curves (4a, 4b, 5, 8). Figure numbers are the same in every report.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from harness.errors import UsageError
from harness.measure.provenance import code_version
from harness.report import cost, figures, frames, rates
from harness.report.attribution import attribution_section
from harness.report.explain import explain_section
from harness.report.method import column, distinct, method_section, provenance_section
from harness.report.panels import Caption, left_out_note
from harness.report.parity import ParityCheck, parity_section
from harness.report.roofline import caption as roofline_caption
from harness.report.roofline import roofline
from harness.report.setup import setting_values, setup_section
from harness.report.studies import studies_section
from harness.report.style import framework_order, in_framework_order, save
from harness.results import estimates, notes, tables
from harness.results.estimates import REFERENCE
from harness.results.machines import require_one_machine
from harness.results.markdown import markdown_table
from harness.results.profiles import SavedProfile
from harness.results.records import NOT_RUN, Status
from harness.results.store import ResultsStore, newest_versions
from harness.run.suites import builtin_suites, load_suite

ROOFLINE_STEM = "roofline"

MIN_EPOCHS_FOR_CURVES = 3  # fewer epochs: no per-epoch line figures (1, 2, 7)
OUTPUT_SUFFIXES = {".png", ".pdf", ".svg", ".dot", ".md", ".tex", ".csv"}


@dataclass
class PlannedFigure:
    number: str  # "1", "6a", "8": the same figure has the same number in every report
    stem: str  # file name without suffix
    title: str
    caption: Caption
    draw: Callable[[], Figure]


@dataclass
class Table:
    title: str
    stem: str
    headers: list[str]
    rows: list[list[str]]
    csv: pd.DataFrame
    notes: list[str] = field(default_factory=list)  # printed under the table


def _standard_figures(data: frames.SuiteData) -> list[PlannedFigure]:
    return [
        PlannedFigure("1", "fig1_train_accuracy", "Training accuracy per epoch",
                      figures.ACCURACY_CAPTIONS["train_acc"],
                      lambda: figures.accuracy_per_epoch(data, "train_acc")),
        PlannedFigure("2", "fig2_test_accuracy", "Test accuracy per epoch",
                      figures.ACCURACY_CAPTIONS["test_acc"],
                      lambda: figures.accuracy_per_epoch(data, "test_acc")),
        PlannedFigure("3", "fig3_batches", "Loss and accuracy over batches",
                      figures.BATCH_CURVES_CAPTION, lambda: figures.batch_curves(data)),
    ]


def _cost_figures(data: frames.SuiteData) -> list[PlannedFigure]:
    out = []
    if not data.steps.empty and cost.has_ratios(data):
        out.append(PlannedFigure("4a", "fig4a_ratios", "Each framework against torch",
                                 cost.ratios_caption(data), lambda: cost.ratio_dots(data)))
    if not data.steps.empty:
        out.append(PlannedFigure("4b", "fig4b_time", "Training time and step time",
                                 cost.TIME_CAPTION, lambda: cost.time_dots(data)))
    if data.has_memory:
        out.append(PlannedFigure("5", "fig5_memory", "Memory", cost.MEMORY_CAPTION,
                                 lambda: cost.memory_dots(data)))
    return out


def _sweep_figures(data: frames.SuiteData) -> list[PlannedFigure]:
    out = []
    if "batch_size" in data.swept:
        out.append(PlannedFigure("6a", "fig6a_scaling_batch", "Cost against batch size",
                                 figures.SCALING_BATCH_CAPTION,
                                 lambda: figures.scaling_batch(data)))
    if {"extra_width", "extra_seq_len"} & set(data.swept):
        out.append(PlannedFigure("6b", "fig6b_scaling_size", "Cost against model size",
                                 figures.SCALING_SIZE_CAPTION, lambda: figures.scaling_size(data)))
    return out


def _circles_figures(data: frames.SuiteData) -> list[PlannedFigure]:
    out = [PlannedFigure("8", "fig8_circles", "The circles study", figures.CIRCLES_CAPTION,
                         lambda: figures.circles_curves(data))]
    if set(data.ok["dataset"]) == {"circles"}:
        out.append(PlannedFigure("9", "fig9_circles_data", "The circles dataset",
                                 figures.CIRCLES_DATA_CAPTION, figures.circles_dataset))
    return out


def plan_figures(data: frames.SuiteData) -> tuple[list[PlannedFigure], list[tuple[str, str]]]:
    """The figures this suite's data supports, and (figures, reason) for those it does not."""
    if data.swept:
        return _sweep_figures(data), [("Figures 1-5, 7", "a sweep suite has several settings per "
                                                         "model and framework; see figure 6")]
    planned, skipped = [], []
    if data.has_folds:
        planned += _cost_figures(data) + _circles_figures(data)
        skipped.append(("Figures 1-3, 7", "the circles study's learning curves are figure 8 "
                                          "and its accuracies are in the table"))
    else:
        standard = _standard_figures(data)
        if data.batches.empty:
            standard.pop()
            skipped.append(("Figure 3", "no per-batch records were stored"))
        if data.epoch_count < MIN_EPOCHS_FOR_CURVES:
            # a line through two points shows no course of learning, and a slope between them
            # reads as a difference in learning speed
            standard = [f for f in standard if f.number == "3"]
            plural = "" if data.epoch_count == 1 else "s"
            skipped.append(("Figures 1, 2 and 7", f"{data.epoch_count} epoch{plural} make lines "
                            f"of {data.epoch_count} point{plural}; the final accuracies are in "
                            f"the tables" + (", and figure 3 shows learning batch by batch"
                                             if standard else "")))
        planned += standard + _cost_figures(data)
        if data.epoch_count >= MIN_EPOCHS_FOR_CURVES:
            planned.append(PlannedFigure("7", "fig7_time_to_accuracy",
                                         "Accuracy against training time",
                                         figures.TIME_TO_ACCURACY_CAPTION,
                                         lambda: figures.time_to_accuracy(data)))
        skipped.append(("Figures 6, 8 and 9", "figure 6 needs a sweep suite (scaling), figures 8 "
                                              "and 9 a cross-validation suite (circles)"))
    if data.steps.empty:
        skipped.append(("Figures 4a and 4b", "no step times were stored"))
    elif not cost.has_ratios(data):
        skipped.append(("Figure 4a", f"a ratio needs {REFERENCE} and another framework"))
    if not data.has_memory:
        skipped.append(("Figure 5", "this suite ran without the memory pass"))
    return sorted(planned, key=lambda f: f.number), skipped


def plan_tables(data: frames.SuiteData) -> list[Table]:
    """The papers' table per model (not for sweeps: they mix settings), the accuracy table of a
    cross-validation suite, and a step-time table per swept setting."""
    out: list[Table] = []
    if data.swept:
        for column in (c for c in data.swept if c != "lr"):  # a rate is no cost axis
            points = frames.sweep_points(data, column)
            label = frames.SWEEP_COLUMNS[column]
            headers, rows = tables.sweep_table(points, column, label[0].upper() + label[1:],
                                               framework_order(points["framework"]))
            name = column.removeprefix("extra_")
            out.append(Table(f"Step time against {label} (median [95% CI; processes], ms)",
                             f"scaling_{name}", headers, rows, points,
                             notes=tables.against_the_trend(points, column)))
        return out
    summary = data.summary()
    count = "Runs" if data.has_folds else "Seeds"
    measured = "time, memory and accuracy" if data.has_memory else "time and accuracy"
    spread = ("build + warm-up, memory and accuracy" if data.has_memory else
              "build + warm-up and accuracy")
    for model, rows in in_framework_order(summary).groupby("model", sort=False):
        headers, body = tables.model_table(rows, REFERENCE)
        headers[-1] = count
        ratio = (f"; its ratio to {REFERENCE}: paired, with the 95% PI where a rerun's falls"
                 if (rows["framework"] == REFERENCE).any() else "")
        out.append(Table(f"{model}: {measured} ({spread}: mean ± std over {count.lower()}, the "
                         f"std left out where it rounds to zero at the digits shown; training "
                         f"and step time: median over processes, 95% CI{ratio})",
                         f"model_{model}", headers, body, estimates.flat_estimates(rows),
                         notes=[*tables.mark_notes(rows),
                                *filter(None, [notes.reported_facts(
                                    data.ok[data.ok["model"] == model])]),
                                *tables.verdict_notes(rows, REFERENCE)]))
    if data.has_folds:
        accuracy = estimates.accuracy_summary(data.ok, data.epochs)
        headers, rows = tables.accuracy_table(accuracy)
        out.append(Table("Train and test accuracy (mean ± std over folds × repetitions)",
                         "accuracy", headers, rows, accuracy))
    return out


def _cell(text: object) -> str:
    """Text that cannot break a Markdown table row."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _unfinished_section(cases: pd.DataFrame) -> list[str]:
    """The runs that did not finish, with their reasons (nothing when all finished)."""
    bad = cases[~cases["status"].isin([Status.OK, *NOT_RUN])]
    if bad.empty:
        return []
    rows = [[r["model"], r["framework"], str(r["seed"]), r["status"], _cell(r["reason"])[:100]]
            for _, r in bad.iterrows()]
    return ["## Runs left out", "", "These runs did not finish and are in no figure or table:", "",
            markdown_table(["Model", "Framework", "Seed", "Status", "Reason"], rows), ""]


# The cases recorded without running, each status under a heading and a sentence of its own.
NOT_RUN_SECTIONS = {
    Status.UNSUPPORTED: ("Not supported", "These cases were not run: their framework does not "
                         "support them (n/a in the tables, in no figure). This is no failure."),
    Status.LEFT_OUT: ("Left out", "The suite declares these cases and their frameworks support "
                      "them, but it does not run them, for what they cost (its `not_run` table; "
                      "\"left out\" in the tables, named in every figure's caption)."),
}


def _not_run_sections(cases: pd.DataFrame) -> list[str]:
    """The cases not run, by status (NOT_RUN_SECTIONS), with their reasons; nothing for a
    status no case has."""
    lines = []
    for status, (heading, sentence) in NOT_RUN_SECTIONS.items():
        groups = cases[cases["status"] == status].groupby(["model", "framework", "reason"],
                                                         sort=False).size()
        rows = [[model, framework, _cell(reason), str(n)]
                for (model, framework, reason), n in groups.items()]
        if rows:
            lines += [f"## {heading}", "", sentence, "",
                      markdown_table(["Model", "Framework", "Reason", "Cases"], rows), ""]
    return lines


def _unmeasured_section(suite: str, cases: pd.DataFrame) -> list[str]:
    """The models of a built-in suite of which the store holds no case (nothing for a suite
    file, or when every model ran): a report of part of a suite says which part is missing."""
    if suite not in builtin_suites():
        return []
    present = set(cases["model"])
    absent = [m for m in dict.fromkeys(c.model for c in load_suite(suite).cases)
              if m not in present]
    if not absent:
        return []
    names = " ".join(absent)
    return ["## Not measured", "", f"The suite also declares {', '.join(absent)}, of which the "
            "store holds no case: this report covers part of the suite. To add "
            f"{'it' if len(absent) == 1 else 'them'}: `adh run {suite} --models {names}` into the "
            f"same store (`--store`), then `adh report {suite}` again.", ""]


def _clear_outputs(folder: Path) -> None:
    """Remove a previous build's files, so that a figure no longer drawn does not linger."""
    if folder.is_dir():
        for path in folder.iterdir():
            if path.is_file() and path.suffix in OUTPUT_SUFFIXES:
                path.unlink()


def load_suite_data(store: ResultsStore, suite: str) -> frames.SuiteData:
    """The suite's frames; UsageError naming the stored suites when it has no finished case."""
    stored = store.suites()
    if suite not in stored:
        have = f"the stored suites are: {', '.join(stored)}" if stored else "the store is empty"
        raise UsageError(f"no results for suite {suite!r} in {store.path}; {have} "
                         f"(run `adh run {suite}` first)")
    cases = newest_versions(store.cases(suite))
    data = frames.SuiteData.from_frames(cases, store.epochs(suite), store.batches(suite),
                                        store.steps(suite), store.runs(suite), store.verdicts())
    if data.ok.empty:
        statuses = ", ".join(f"{n} {s}" for s, n in cases["status"].value_counts().items())
        raise UsageError(f"suite {suite!r} in {store.path} has no finished case ({statuses}); "
                         f"the stored suites are: {', '.join(stored)}")
    return data


def require_one_commit(cases: pd.DataFrame, suite: str, store: Path, allow: bool = False) -> None:
    """Refuse (UsageError) finished `cases` measured with more than one version of the harness's
    code (its commit, with "+dirty.<hash>" for uncommitted edits; the commit alone in records
    without the version), naming each and the command that fixes it, unless `allow`."""
    versions = column(cases, "prov_code_version").fillna(column(cases, "prov_commit"))
    counts = versions.dropna().astype(str).value_counts()
    if len(counts) <= 1 or allow:
        return
    listed = "; ".join(f"{v} ({n} case{'s' * (n > 1)})" for v, n in counts.items())
    raise UsageError(f"suite {suite!r} in {store} holds cases of {len(counts)} versions of the "
                     f"code ({listed}): a report's numbers come from one; run the suite again "
                     f"at one commit (`adh run {suite} --store {store}`), or pass "
                     "--allow-mixed-commits to report them together (the provenance lists each)")


def _store_option(command: str) -> str | None:
    """The `--store` that an `adh` command line names, or None."""
    words = shlex.split(command)
    for i, word in enumerate(words):
        if word == "--store" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--store="):
            return word.removeprefix("--store=")
    return None


def regenerate_note(cases: pd.DataFrame, suite: str, store: Path,
                    command: str | None = None, rendered_at: str | None = None) -> list[str]:
    """The commands that rebuild the report of finished `cases`, at its top, in two lines. The
    rebuild: the commit that renders it (`rendered_at`, default this checkout's code version)
    and `command`, the `adh report` that built it (default: the plain one); run as written from
    that commit, it rebuilds the report from the store it names (committed beside the report, or
    of the reader's own). The measurement: the commit the cases ran at, the `adh run` commands
    they recorded (each case's provenance `command`), and the `adh merge` of their stores where
    they ran into stores other than the report's (a suite run in shards), and the notes kept
    beside the store (the README.md of its folder, where that is not the working directory,
    whose README is the project's)."""
    versions = column(cases, "prov_code_version").fillna(column(cases, "prov_commit"))
    commits = list(dict.fromkeys(str(v).split("+")[0] for v in versions.dropna()))
    runs = list(dict.fromkeys(column(cases, "prov_command").dropna()))
    checkout = (f"`git checkout {commits[0]}`" if len(commits) == 1 else
                "at the commits the provenance names")
    if versions.dropna().astype(str).str.contains(r"\+dirty").any():
        checkout += " (its runs had uncommitted changes, which the commit lacks)"
    run = ("; ".join(f"`{c}`" for c in runs) if runs else
           f"`adh run {suite} --store {store}` (the run recorded no command of its own)")
    shards = [s for s in dict.fromkeys(map(_store_option, runs)) if s and s != str(store)]
    if shards:
        run += f", then `adh merge {store} {' '.join(shards)}`"
    report = command or f"adh report {suite} --store {store}"
    notes = store.parent / "README.md"  # the measurers' own account: sittings, pauses, shards
    kept = (f" The notes kept beside the store ({notes}) say how and when it was measured."
            if notes.is_file() and store.parent.resolve() != Path.cwd().resolve() else "")
    rendered = rendered_at or code_version()
    dirty = (" (uncommitted changes: the line rebuilds it only from a clean tree at a commit "
             "holding them)" if "+dirty" in rendered else "")
    return [f"**To rebuild this report:** `git checkout {rendered.split('+')[0]}`{dirty}, then "
            f"`{report}`.", "",
            "Both run in the environment `make .venv/bin/.installed` sets up (every framework "
            "and plugin of the tables), with the suite's dataset installed: `adh report` checks "
            "parity first (`--no-check` skips it).", "",
            f"**To measure again:** {checkout}, then {run}; then the report as above, from the "
            f"store the runs filled ({store}; where the commit that renders holds a store at that "
            f"path, move yours out of the checkout first and name it in --store).{kept} The "
            "numbers will differ: their intervals take in how this run's processes scattered, "
            "not another machine or another sitting of this one, so a rerun's may fall outside "
            "them; the machine and the host's steadiness below say where these came from.", ""]


def _smoke_test_note(data: frames.SuiteData) -> list[str]:
    """A warning at the top of a report whose runs are too short to cite: fewer epochs than
    MIN_EPOCHS_FOR_CURVES (nothing in it is a learning curve)."""
    if data.swept or data.has_folds or data.epoch_count >= MIN_EPOCHS_FOR_CURVES:
        return []
    return [f"**A smoke test, not a study:** {data.epoch_count} epoch"
            f"{'' if data.epoch_count == 1 else 's'} and {data.repetitions} seed"
            f"{'' if data.repetitions == 1 else 's'} per case show that every framework runs and "
            f"roughly how they compare, not where training ends. The numbers to cite come from a "
            f"suite with at least {MIN_EPOCHS_FOR_CURVES} epochs and several seeds "
            f"(`adh run paper`).", ""]


def _settings(cases: pd.DataFrame) -> str:
    """'fashion-mnist, 5 epochs, batch 100, 2 threads, float32' (the values of the suite's
    cases, as the Setup table gives them): what a table's LaTeX caption must say to stand
    alone."""
    dataset, epochs, batch, threads, dtype = (setting_values(cases, c) for c in (
        "dataset", "epochs", "batch_size", "threads", "dtype"))
    return (f"{dataset}, {epochs} epoch{'' if epochs == '1' else 's'}, batch {batch}, "
            f"{threads} threads, {dtype}")


def _machines_section(data: frames.SuiteData) -> list[str]:
    """Where the cases come from several machines (allowed with --allow-mixed-machines): each
    machine's verdicts side by side, with its roofs and its host's steadiness."""
    text = notes.machine_verdicts(data.ok, data.runs)
    if not text:
        return []
    return ["## Verdicts per machine", "",
            "These results come from more than one machine. Each ratio below pairs runs of one "
            "machine only; a verdict that holds on one machine is that machine's.", "", text, ""]


def _tables_section(data: frames.SuiteData, suite: str, table_dir: Path) -> list[str]:
    """Write every table as Markdown, LaTeX and CSV; the report's lines showing them."""
    lines = ["## Tables", ""]
    settings = _settings(data.ok)
    for table in plan_tables(data):
        markdown = markdown_table(table.headers, table.rows)
        notes = [f"{note[0].upper()}{note[1:]}." for note in table.notes]  # a mark's legend too
        (table_dir / f"{table.stem}.md").write_text(
            "\n".join([markdown, *([""] if notes else []), *(f"- {n}" for n in notes)]) + "\n")
        (table_dir / f"{table.stem}.tex").write_text(tables.latex_table(
            table.headers, table.rows,
            caption=" ".join([f"{table.title}. Setting: {settings}.", *notes]),
            label=f"tab:{suite}-{table.stem}"))
        table.csv.to_csv(table_dir / f"{table.stem}.csv", index=False)
        lines += [f"### {table.title}", "", markdown, "", *(f"- {n}" for n in notes),
                  *([""] if notes else []),
                  f"[LaTeX](tables/{table.stem}.tex) · [CSV](tables/{table.stem}.csv)", ""]
    return lines


def _figures_section(data: frames.SuiteData, figure_dir: Path) -> list[str]:
    """Draw and write every figure the suite supports; the report's lines showing them."""
    lines = ["## Figures", ""]
    planned, skipped = plan_figures(data)
    left_out = left_out_note(data.cases)
    for fig in planned:
        save(fig.draw(), figure_dir / fig.stem)
        lines += [f"### Figure {fig.number}. {fig.title}", "",
                  f"![Figure {fig.number}: {fig.title}](figures/{fig.stem}.png)", "",
                  f"{fig.caption.render(data)}{left_out} [PDF](figures/{fig.stem}.pdf)", ""]
    if skipped:
        lines += ["Not drawn for this suite:", "",
                  *(f"- {what}: {why}." for what, why in skipped), ""]
    return lines


def _profiles_section(profiles: list[SavedProfile], figure_dir: Path) -> list[str]:
    """The per-op profiles `adh profile` saved: each one's table, then the roofline figure."""
    if not profiles:
        return []
    lines = ["## Where the time goes", "",
             "One training step per op, forward and backward apart, from `adh profile` (the "
             "engine timed from its graph, torch with torch.profiler, jax with jax.profiler "
             "by the compiled step's XLA instructions, whose FLOPs XLA does not count one by "
             "one (or, from a jaxlib whose trace holds no instruction, the step as one row with "
             "XLA's cost analysis: its bytes are every access of every op, not only the reads "
             "of the step's inputs); a framework without a profiler is one row): time per "
             "step (the median over the profiled steps) and its "
             "share of the step measured without the profiler, FLOPs where known (matrix "
             "products and convolutions), the bytes of the arrays each op reads, achieved "
             "GFLOP/s and its share of the machine's GEMM peak. Profiled apart from the runs "
             "above, in one process per framework.", ""]
    for profile in profiles:
        s = profile.settings
        lines += [f"### {profile.framework} on {profile.model}", "",
                  f"{s.get('dataset')}, batch {s.get('batch_size')}, {s.get('dtype')}, "
                  f"{s.get('threads')} threads, {s.get('cpu_model')}, "
                  f"code {s.get('code_version')}.",
                  "", profile.table(), ""]
    save(roofline(profiles), figure_dir / ROOFLINE_STEM)
    lines += ["### The roofline of the profiled ops", "",
              f"![The roofline of the profiled ops](figures/{ROOFLINE_STEM}.png)", "",
              f"{roofline_caption(profiles)} [PDF](figures/{ROOFLINE_STEM}.pdf)", ""]
    return lines


def build_report(store: ResultsStore, suite: str, out_dir: Path | None = None,
                 profiles: list[SavedProfile] | None = None,
                 allow_mixed_machines: bool = False,
                 parity: Callable[[frames.SuiteData], ParityCheck] | None = None,
                 allow_mixed_commits: bool = False, command: str | None = None) -> Path:
    """Write the report of `suite` to `out_dir` (default reports/<suite>/): figures as PNG (200
    dpi) and PDF under figures/, tables as Markdown, LaTeX and CSV under tables/, and report.md
    showing them all with the provenance and the measurement method, and `profiles` (from
    harness.results.profiles.read_profiles) with a roofline figure, after a Setup table and the
    parity checks that `parity` makes of the suite's data once it passed the refusals below
    (harness.report.parity.check_suite; None: a line saying how to run them),
    and the published studies' numbers beside ours where the suite ran their models. Files of
    an earlier build in figures/ and tables/ are removed first. Returns report.md's path.
    Raises UsageError when the store holds no finished case of `suite`, or cases of several
    machines unless `allow_mixed_machines` (harness.results.machines), or of several versions of the
    harness's code unless `allow_mixed_commits` (`require_one_commit`). `command`, the `adh
    report` that asks, is quoted at the top with the run's (`regenerate_note`)."""
    rendered_at = code_version()
    data = load_suite_data(store, suite)
    require_one_machine(data.cases, f"suite {suite!r} in {store.path}", allow_mixed_machines)
    require_one_commit(data.ok, suite, store.path, allow_mixed_commits)
    search: list[str] = []
    if rates.is_rate_search(data):  # the rates not chosen appear in the search's table alone
        grid = rates.rate_grid(data)
        search = rates.rate_search_section(grid, data)
        data = rates.at_chosen_rates(data, grid)
    out_dir = Path(out_dir) if out_dir is not None else Path("reports") / suite
    figure_dir, table_dir = out_dir / "figures", out_dir / "tables"
    for folder in (figure_dir, table_dir):
        _clear_outputs(folder)
        folder.mkdir(parents=True, exist_ok=True)
    frameworks = framework_order(data.ok["framework"])
    lines = [f"# Report: suite `{suite}`", "",
             f"{len(data.ok)} finished runs of {len(data.models)} "
             f"model{'s' * (len(data.models) > 1)} × {len(frameworks)} "
             f"framework{'s' * (len(frameworks) > 1)} ({', '.join(frameworks)}) on "
             f"{distinct(data.ok['dataset'])}.", "",
             *regenerate_note(data.ok, suite, store.path, command, rendered_at),
             *_smoke_test_note(data),
             *setup_section(data.ok, data.models),
             *parity_section(parity(data) if parity else None, data.ok, suite),
             *search,
             "## Provenance", "", provenance_section(data.cases, rendered_at), "",
             "## How this was measured", "", method_section(data), "",
             *_unfinished_section(data.cases),
             *_not_run_sections(data.cases),
             *_unmeasured_section(suite, data.cases),
             *_machines_section(data),
             *_tables_section(data, suite, table_dir),
             *attribution_section(data, figure_dir),
             *studies_section(data),
             *_figures_section(data, figure_dir),
             *_profiles_section(profiles or [], figure_dir),
             *explain_section(frameworks, data.models, figure_dir)]
    report = out_dir / "report.md"
    report.write_text("\n".join(lines))
    return report
