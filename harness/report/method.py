"""The report's Provenance and Method sections: where and with what each run measured (the
commit, the machine, the packages and their versions, the environment every process had), and
how (rounds of fresh processes, warm-up, the flagging policy in force, the estimators).
"""
from __future__ import annotations

import pandas as pd
from scipy.stats import binom

from harness.measure import warmup as warmup_rule
from harness.measure.policy import FlagPolicy
from harness.measure.provenance import LIBRARIES, CpuDetails, code_version
from harness.measure.roofs import GEMM_SIZE
from harness.measure.stats import ORDER_STATISTICS_FROM, median_interval
from harness.report import frames
from harness.results import notes
from harness.results.estimates import REFERENCE, rounds_against_their_pi, used_runs
from harness.results.machines import case_machines
from harness.results.markdown import markdown_table
from harness.results.records import NOT_RUN
from harness.results.tables import UNDECIDABLE_PP, ordinal, outside_words


def distinct(values: pd.Series) -> str:
    """The distinct values of a provenance column, most frequent first, with their run counts
    when there are several."""
    counts = values.dropna().astype(str).value_counts()
    if counts.empty:
        return "unknown"
    if len(counts) == 1:
        return counts.index[0]
    return ", ".join(f"{v} ({n} runs)" for v, n in counts.items())


def column(cases: pd.DataFrame, name: str) -> pd.Series:
    return (cases[name] if name in cases.columns else
            pd.Series([None] * len(cases), index=cases.index, dtype=object))


def _package(distribution: object, version: object, code_version: object) -> str | None:
    """"x-adapter 1.2 (commit abc1234)" from a framework's provenance; None if not recorded."""
    if pd.isna(distribution):
        return None
    text = f"{distribution} {version}" if pd.notna(version) else str(distribution)
    return text + (f" (commit {code_version})" if pd.notna(code_version) else "")


def framework_packages(cases: pd.DataFrame) -> str:
    """Each framework's package, version and commit, as its runs recorded them."""
    columns = [f"prov_framework_{c}" for c in ("distribution", "version", "code_version")]
    frame = cases.reindex(columns=["framework", *columns])
    labels = pd.Series([_package(*row[1:]) for row in frame.itertuples(index=False)],
                       dtype=object)
    return "; ".join(f"{fw}: {distinct(labels[(frame['framework'] == fw).to_numpy()])}"
                     for fw in dict.fromkeys(frame["framework"]))


def cpu_described(cases: pd.DataFrame) -> str:
    """The CPUs the runs recorded (CpuDetails.describe), with their run counts where several;
    'not recorded' for runs from before the record."""
    fields = CpuDetails.__dataclass_fields__
    frame = cases.reindex(columns=[f"prov_cpu_{name}" for name in fields])
    described = pd.Series([
        None if pd.isna(row[0]) else CpuDetails(*(None if pd.isna(v) else v for v in row)
                                                ).describe()
        for row in frame.itertuples(index=False)], index=cases.index, dtype=object)
    return "not recorded" if described.isna().all() else distinct(described)


def host_described(cases: pd.DataFrame) -> str:
    """The host the runs recorded (harness.measure.system's facts, and the roofs measured on it
    before them): a virtual machine or not, its clock's controls, its memory bandwidth and GEMM
    peaks; 'unknown' where runs from before the record lack a part."""
    def formatted(name: str, unit: str) -> str:
        return distinct(column(cases, name).map(lambda v: f"{v:.1f} {unit}", na_action="ignore"))

    flag = column(cases, "prov_system_hypervisor").dropna().astype(str)
    vm = ("virtual machine: unknown" if flag.empty else
          "a virtual machine (the CPU's hypervisor flag; its model name is the one the hypervisor "
          "shows its guest, which may leave out the exact part)" if flag.str.startswith("yes").all()
          else "not a virtual machine (no hypervisor flag)" if flag.str.startswith("no").all()
          else f"virtual machine: {distinct(flag)}")

    def control(name: str) -> str:  # "not exposed (virtual machine?)": the guess said above
        said = distinct(column(cases, f"prov_system_{name}"))
        return said.replace(" (virtual machine?)", "") if vm.startswith("a virtual") else said

    threads = sorted(int(c.rsplit("_", 1)[1]) for c in cases.columns
                     if c.startswith("prov_gemm_peaks_gflops_"))
    peaks = ", ".join(f"{formatted(f'prov_gemm_peaks_gflops_{n}', 'GFLOP/s')} on {n} "
                      f"thread{'s' * (n != 1)}" for n in threads) or "unknown"
    return (f"{vm}; CPU governor {control('CPU governor')}; turbo boost "
            f"{control('turbo boost')}; measured on it before the runs: memory bandwidth "
            f"(triad) {formatted('prov_memory_bandwidth_gbs', 'GB/s')}, float32 GEMM peak {peaks}")


def provenance_section(every: pd.DataFrame, rendered_at: str | None = None) -> str:
    """Where and with what the suite's runs ran, as a Markdown list: from the cases the runner
    started (all but the unsupported, which ran nowhere), but for the frameworks' packages,
    which a case one declined records too; and the commit of the code that renders it
    (`rendered_at`; default: this checkout's)."""
    cases = every[~every["status"].isin(NOT_RUN)]
    commit = column(cases, "prov_code_version").fillna(
        column(cases, "prov_commit").astype(str) + column(cases, "prov_dirty").map(
            lambda d: " (uncommitted changes)" if d is True else ""))
    dataset = column(cases, "prov_dataset").fillna(cases["dataset"]).astype(str)
    checksum = column(cases, "prov_dataset_checksum").fillna("unknown").astype(str)
    started = pd.to_datetime(cases["started_at"], utc=True, errors="coerce").dropna()
    stored = pd.to_datetime(column(cases, "stored_at"), utc=True, errors="coerce").dropna()
    ended = max([*stored, *started], default=None)  # a case is stored when its last pass ends
    when = ("their start not recorded" if started.empty else
            f"from {started.min():%Y-%m-%d %H:%M} to {ended:%Y-%m-%d %H:%M} UTC (the first "
            f"case's start to the last one's end)")
    versions = ", ".join(
        [f"{name} {distinct(column(cases, f'prov_{name}'))}"
         for name in ("python", "numpy", "torch", "memray")]
        + [f"{name} {distinct(column(cases, f'prov_versions_{name}'))}"  # where recorded
           for name in (*LIBRARIES, "onednn")
           if column(cases, f"prov_versions_{name}").notna().any()]
        + [f"BLAS {distinct(column(cases, 'prov_blas'))}"])
    lines = [
        f"- Machine: {distinct(case_machines(cases))}; {distinct(column(cases, 'prov_os'))}",
        f"- Threads per run: {distinct(cases['threads'])}; dtype {distinct(cases['dtype'])}",
        f"- Versions: {versions}",
        f"- CPU: {cpu_described(cases)}",
        f"- Host: {host_described(cases)}",
        f"- Code: measured at commit {distinct(commit)}; this report rendered at commit "
        f"{rendered_at or code_version()}",
        f"- Frameworks: {framework_packages(every)}",
        f"- Dataset: {distinct(dataset + ' (sha256 ' + checksum.str[:16] + '…)')}",
        f"- Runs: {len(cases)}, {when}",
    ]
    return "\n".join(lines)


def _environment(cases: pd.DataFrame) -> str:
    """The measured processes' allocator and OpenMP settings, as recorded in provenance."""
    names = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "OMP_WAIT_POLICY", "OMP_PROC_BIND",
             "LD_PRELOAD")
    parts = [f"{n}={distinct(column(cases, f'prov_environment_{n}'))}" for n in names]
    return ", ".join(p for p in parts if not p.endswith("=unknown"))


def _thresholds(policy: FlagPolicy) -> str:
    """A flag policy in words."""
    return (f"contended above {policy.contention_threshold:.0%} of the machine and "
            f"{policy.min_foreign_cpu_s:g} s of CPU time, drift above {policy.probe_threshold:.0%} "
            f"(the reference workload), at most {policy.retries} repeats")


def policy_in_force(cases: pd.DataFrame) -> str:
    """The flag policy that the cases' provenance records, in words: its thresholds, those of
    each group of cases where they differ, or that the provenance does not record them."""
    recorded = cases.filter(regex="^prov_policy_").rename(
        columns=lambda c: c.removeprefix("prov_policy_"))
    policies = (FlagPolicy.from_record(row) for _, row in recorded.iterrows())
    described = pd.Series([_thresholds(p) if p else "not recorded" for p in policies], dtype=object)
    counts = described.value_counts()
    if len(counts) > 1:
        return "the runs recorded different thresholds: " + "; ".join(
            f"{what} ({n} run{'' if n == 1 else 's'})" for what, n in counts.items())
    if counts.index[0] == "not recorded":
        return ("the thresholds in force are unknown: these runs were stored before provenance "
                "recorded them")
    return f"the thresholds, as the runs recorded them: {counts.index[0]}"


def interval_method(counts: list[int]) -> str:
    """How a step time's 95 % interval is made at each of the process counts `counts`, and how
    often it really holds the median there."""
    parts = []
    for n in sorted(set(counts)):
        if n >= ORDER_STATISTICS_FROM:
            low, high, coverage = median_interval(n)
            ranks = ("the smallest to the largest" if (low, high) == (1, n) else
                     f"the {ordinal(low)} smallest to the {ordinal(high)}")
            parts.append(f"from {n} processes {ranks} (an interval of order statistics, which "
                         f"holds the median {coverage:.1%} of the time whatever the noise's "
                         "shape)")
        elif n > 1:
            parts.append(f"from {n} processes Student's t on the logarithms (95 % where their "
                         "logarithms scatter normally, which nothing checks at so few; centred "
                         "on their mean, so the median, the point given, may sit off its middle)")
        else:
            parts.append("from 1 process none")
    return "; ".join(parts)


# The misses a report names one by one; beyond them it counts.
MISSES_NAMED = 6
PROMISED = 0.95  # how often a 95 % PI holds a rerun's ratio


def rounds_check(runs: pd.DataFrame) -> str:
    """The PI checked on the run's own rounds (estimates.rounds_against_their_pi), in a
    sentence: how often it held, against the 95 % it promises, and the rounds it missed; ""
    where fewer than two rounds gave a PI."""
    check = rounds_against_their_pi(runs, REFERENCE)
    if not check.compared:
        return ""
    share = check.held / check.compared
    named = [f"{m.model} {m.framework}, round {m.round}: "
             + ", outside ".join(outside_words(m.ratio, m.pi)) for m in check.misses[:MISSES_NAMED]]
    more = len(check.misses) - len(named)
    missed = ("; missed: " + "; ".join(named) + (f"; {more} more" if more else "")
              if named else "")
    chance = float(binom.cdf(check.held, check.compared, PROMISED))
    reading = ("as often as it promises" if share >= PROMISED else
               f"{'less often than' if chance < 0.05 else 'a little under'} the 95 % it promises "
               f"(so few or fewer hold by chance "
               f"{f'{chance:.0%}' if chance >= 0.01 else 'less than 1%'} of the time where it "
               "holds 95 %, "
               "if the checks were independent, which they are not quite): where rounds differ "
               "by what the host did between them, which the pairs within one round share, a PI "
               "is narrower than a rerun's spread, and one that barely excludes 1 decides less "
               "than it seems")
    return (f"The PI checked on this run's own rounds (each round left out in turn, its ratio "
            f"to {REFERENCE} set against the PI the other rounds make, for every model and "
            f"framework): it held {check.held} of {check.compared} ({share:.0%}), {reading}"
            f"{missed}. The other rounds hold fewer pairs than the tables' PIs rest on, so this "
            f"checks how a PI is made, not each one printed, and rounds of one sitting say "
            f"nothing of another sitting.")


def method_section(data: frames.SuiteData) -> str:
    """How the numbers were measured, with this suite's counts (seeds, rounds, flagged runs)."""
    n = data.repetitions
    runs = data.runs
    per_case = runs.groupby("key").size() if len(runs) else pd.Series([0])
    rounds = (f"{per_case.max()}" if per_case.min() == per_case.max()
              else f"{per_case.min()} to {per_case.max()}")
    flagged = runs[runs["flagged"]] if len(runs) else runs
    warmup = runs["warmup_steps"].median() if len(runs) else float("nan")
    retried = int((~runs["flagged"] & (runs["attempts"] > 1)).sum()) if len(runs) else 0
    if data.swept:
        spread = ("The scaling tables and figures give each setting's step time as the median over "
                  "its processes of each process's median step, with a 95% confidence interval.")
    else:
        reps = f"{n} runs (seeds × folds)" if data.has_folds else f"{n} seeds"
        # the processes each table's interval rests on (flagged ones left out while clean exist)
        processes = (list(used_runs(runs).groupby(["model", "framework"]).size()) if len(runs)
                     else [0])
        spread = ((f"Build + warm-up{', memory' if data.has_memory else ''} and accuracy are "
                   f"the mean ± standard deviation over {reps} per "
                  f"model and framework" if n > 1
                  else "Each model and framework ran with one seed")
                  + f". Step time is the median over all processes (seeds × rounds) of each "
                  f"process's median step, and training time the median of the processes' "
                  f"training times, each with a 95% confidence interval: "
                  f"{interval_method(processes)}. The ratio to {REFERENCE}, the verdict, is "
                  f"paired: each process is divided by {REFERENCE}'s process of the same round "
                  f"and seed, and its interval is the 95% prediction interval of their median "
                  f"(PI: where a rerun's ratio falls, √2 times as wide as the ratios' confidence "
                  f"interval, made as above, in logarithms; where that interval holds the median "
                  f"more often than 95 %, the PI is as much wider). It takes in how the processes "
                  f"of this run scattered, not how the host may differ between one run and the "
                  f"next, nor another machine: a ratio holds for the machine under Provenance, "
                  f"and another CPU, BLAS or memory system may move it beyond its PI. A ratio "
                  f"whose interval holds 1 is marked ≈: no difference was shown, whatever its "
                  f"point estimate, which is then written as the plain ratio (below 1: faster, or "
                  f"fewer bytes); 'undecided' where that interval also reaches beyond ±25 %."
                  + (f"\n\n{checked}" if (checked := rounds_check(runs)) else "")
                  + f"\n\nA difference in test accuracy to {REFERENCE} is paired by "
                  f"seed, with Student's t over the seeds, each interval one of the family of "
                  f"every such comparison in the tables (Bonferroni: all of them hold together "
                  f"95 times in 100, so that one of twenty does not look decided by chance); one "
                  f"that holds 0 and reaches beyond ±{UNDECIDABLE_PP:g} points is "
                  f"'undecidable' with that many seeds (it cannot rule out a difference that "
                  f"large). Cores: the threads each process was given and "
                  f"the CPU time its training used over its wall time. GFLOP/s is the "
                  f"model's floating-point operations per training step (the matrix products "
                  f"of its dense, "
                  f"convolutional and recurrent layers, forward and backward; element-wise work "
                  f"not counted) over that median step, and its share of this machine's float32 "
                  f"GEMM peak (numpy's product of two {GEMM_SIZE} x {GEMM_SIZE} matrices, so "
                  f"its BLAS's peak, held to every framework alike), measured with the threads "
                  f"the framework "
                  f"used: the count it reported, else its cores rounded (one core of two: the "
                  f"1-thread peak).")
    text = [
        f"Every case ran {rounds} timing pass{'' if rounds == '1' else 'es'}, each in a fresh "
        f"process, in rounds: every case once per round, the order rotated from round to round, so "
        f"that a slow minute of the host falls on every framework alike. Each process had "
        f"{distinct(data.ok['threads'])} threads for every numeric library (BLAS, OpenMP, torch "
        f"intra-op) and the same allocator policy ({_environment(data.ok) or 'unknown'}): with "
        f"glibc's defaults, whether a process reuses heap memory or maps and faults in fresh pages "
        f"every step depends on its first allocations, which makes processes of the same code "
        f"differ; a user of torch with the defaults may get either. "
        f"Every framework starts from the same initial weights and sees the same batch order. "
        f"Timing and memory were measured in separate passes of the same training loop, so that "
        f"memory tracking never slows a timed step. The timing pass times every training step; the "
        f"leading steps until one runs within {warmup_rule.TOLERANCE:.0%} of the pass's steady "
        f"pace (the median of its second half), and the {warmup_rule.WINDOW} after it mostly do "
        f"too, are warm-up (graph and buffer creation, caches, thread pools, compilation"
        + ("" if pd.isna(warmup) else f"; a median of {warmup:.0f} steps here")
        + "): the tables' Build + warm-up column is their time plus the time to build the model "
        "from the weights (where jax compiles its step, and where torch and torch.compile "
        "spend most of theirs importing torch._dynamo, which torch's first optimizer pulls in; "
        "torch.compile and tinygrad compile in the warm-up steps), apart from Time, which is "
        "training alone; evaluation on the test set is timed apart from both.",
        ("The memory pass runs once per case, memray around the training loop only (imports and "
         "data loading excluded): bytes allocated in total and the peak of live bytes. memray "
         "counts what the process asks its allocators for, not what its ops write: a framework "
         "that keeps buffers of its own and reuses them (engine-static's re-fed graph, "
         "tinygrad's TinyJit) asks for little once they exist."
         if data.has_memory else "This suite ran without the memory pass."),
        spread,
        f"While each timing pass ran, the CPU time used by other processes was measured (the "
        f"machine's busy time from /proc/stat minus the run's own), and a fixed reference workload "
        f"(a float32 matrix product and a Python loop) was timed by the runner just before and "
        f"after it. A pass in which other processes used too much of the machine (contended), or "
        f"whose reference workload ran off the clean passes' median (drift: the host changed "
        f"speed; never judged by the pass's own steps, whose level may be the framework's "
        f"doing), was repeated, and then kept and flagged; {policy_in_force(data.ok)}. The "
        f"reference workload is timed around a pass (and at its first turn), not within it: "
        f"a change of the host's speed that comes and goes inside a pass is invisible to it, "
        f"and its threshold flags only a pass whose surroundings ran far off the median, while "
        f"the host's steadiness below says how much identical work varied over the run. "
        f"Flagged passes are left out of the step times and ratios of a model and framework "
        f"while it has clean ones, and a number that rests on flagged passes alone is marked "
        f"[flagged]. **{len(flagged)} of {len(runs)} timing passes were flagged**"
        + (f"; {retried} more were kept only after a repeat." if retried else "."),
    ]
    how = notes.schedule(runs)
    if how:
        text.append(how[len("schedule: "):][0].upper() + how[len("schedule: ") + 1:] + ".")
    steadiness = notes.host_steadiness(runs)
    if steadiness:
        by_command = notes.steadiness_by_command(runs, data.ok)
        text.append(steadiness[0].upper() + steadiness[1:] + " (if each process's time scattered "
                    "independently as the host's did: a rough guide)"
                    + (f"; {by_command}" if by_command else "") + ".")
    said = [line[0].upper() + line[1:] + "." for line in (
        notes.own_level_shifts(runs), notes.reported_facts(data.ok),
        notes.first_call_memory(data.ok)) if line]
    # a paragraph each: the processes, the estimators, the host and its flags, the frameworks'
    out = "\n\n".join(filter(None, (" ".join(text[:2]), spread, " ".join(text[3:]),
                                     " ".join(said))))
    if len(flagged):
        folds = data.has_folds and "extra_fold" in flagged
        rows = [[r["model"], r["framework"], str(r["seed"]),
                 *([str(int(r["extra_fold"]))] if folds else []), str(int(r["run"]) + 1),
                 ", ".join(w for w in ("contended", "drift") if r[w]),
                 "-" if pd.isna(r["foreign_cpu_s"]) else f"{r['foreign_cpu_s']:.2f}"]
                for _, r in flagged.iterrows()]
        out += ("\n\nThe flagged passes, left out as above:\n\n"
                + markdown_table(["Model", "Framework", "Seed", *(["Fold"] if folds else []),
                                  "Round", "Flag", "Foreign CPU (s)"], rows))
    return out
