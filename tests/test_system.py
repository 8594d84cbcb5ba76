"""Tests of harness.measure.system: the facts on this machine, the pure parsers, no numpy at
import."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.measure.numeric_facts import steadiness_fact, system_facts
from harness.measure.system import (
    NOT_EXPOSED,
    Fact,
    aslr_fact,
    cpu_shares,
    format_facts,
    governor_fact,
    parse_cpuinfo,
    provenance_facts,
    turbo_fact,
)

REPO = Path(__file__).resolve().parents[1]
NAMES = {"CPU model", "CPUs", "CPU affinity", "load", "foreign CPU use", "steal time",
         "hypervisor", "CPU governor", "turbo boost", "thread variables", "malloc variables",
         "allocator", "PYTHONHASHSEED", "ASLR", "valgrind", "chromium"}


@pytest.fixture(scope="module")
def facts() -> list[Fact]:
    return system_facts(sample_s=0.1, steadiness_s=0.1)


def test_system_facts_cover_every_name_with_a_valid_verdict(facts):
    assert {f.name for f in facts} == NAMES | {"BLAS", "host steadiness"}
    for f in facts:
        assert f.verdict in ("ok", "warning", "info"), f
        assert f.value and "\n" not in f.value, f
        if f.verdict == "warning":
            assert f.advice, f  # every warning says what to do


def test_more_threads_than_usable_cpus_is_a_warning():
    affinity = next(f for f in system_facts(threads=10_000, sample_s=0, steadiness_s=0)
                    if f.name == "CPU affinity")
    assert affinity.verdict == "warning"
    assert "--threads" in affinity.advice


def test_format_facts_shows_every_name_and_advice(facts):
    text = format_facts(facts)
    for f in facts:
        assert f.name in text and f.value in text
        assert f.advice in text
    warned = format_facts([Fact("steal time", "30.0%", "warning", "measure later")])
    assert warned.splitlines() == ["steal time  30.0%  WARNING", "            -> measure later",
                                   "1 warning"]


def test_host_steadiness_warns_where_identical_work_varies_too_much_for_the_paper_suite():
    steady = steadiness_fact([0.010, 0.0102, 0.0099, 0.0101, 0.0098])
    assert steady.verdict == "ok"
    assert steady.value == "identical work varies by 1.5% (robust CV of 5 timings)"
    shaky = steadiness_fact([0.010, 0.012, 0.008, 0.011, 0.009])  # robust CV 15.6 %
    assert shaky.verdict == "warning"
    assert shaky.advice.startswith("about 250 paired processes (rounds x seeds) give a ratio a "
                                   "95% PI of ±5% at this spread, the paper suite has 6")
    assert "--rounds" in shaky.advice
    # robust CV 1.8 %: the paper suite's 6 paired processes typically reach ±5 %; 2.2 %: not
    assert steadiness_fact([0.988, 1.012, 0.988, 1.012]).verdict == "ok"
    assert steadiness_fact([0.985, 1.015, 0.985, 1.015]).verdict == "warning"
    # one stray timing does not make a host unsteady
    assert steadiness_fact([0.010, 0.0101, 0.0099, 0.0100, 0.0100, 0.030]).verdict == "ok"
    unknown = steadiness_fact([0.01])
    assert (unknown.verdict, unknown.value) == ("info", "not measured (1 timing)")


def test_cpu_shares_from_two_snapshots():
    # Between the snapshots: 1000 ticks in all; user 150 + system 50 busy, 100 stolen.
    before = "cpu  100 0 50 1000 10 0 0 0 0 0\ncpu0 50 0 25 500 5 0 0 0 0 0\nintr 1\n"
    after = "cpu  250 0 100 1700 10 0 0 100 0 0\ncpu0 125 0 50 850 5 0 0 50 0 0\nintr 2\n"
    busy, steal = cpu_shares(before, after)
    assert busy == pytest.approx(0.20)
    assert steal == pytest.approx(0.10)
    busy, _ = cpu_shares(before, after, own_ticks=50)  # this process's own CPU is not foreign
    assert busy == pytest.approx(0.15)
    assert cpu_shares(before, before) == (0.0, 0.0)


def test_parse_cpuinfo():
    block = ("processor\t: {n}\nmodel name\t: Test CPU @ 3.0GHz\nphysical id\t: 0\n"
             "core id\t\t: {core}\nflags\t\t: fpu sse2 {flag}\n")
    text = "\n".join(block.format(n=n, core=n // 2, flag="hypervisor") for n in range(4))
    assert parse_cpuinfo(text) == ("Test CPU @ 3.0GHz", 2, True)
    assert parse_cpuinfo(block.format(n=0, core=0, flag="")) == ("Test CPU @ 3.0GHz", 1, False)
    assert parse_cpuinfo("") == ("unknown", None, False)


def test_governor():
    fact = governor_fact(["powersave\n", "powersave\n"])
    assert (fact.verdict, fact.value) == ("warning", "powersave (2 CPUs)")
    assert "sudo cpupower frequency-set -g performance" in fact.advice
    assert governor_fact(["performance\n"] * 4).verdict == "ok"
    assert governor_fact(["performance\n", "schedutil\n"]).verdict == "warning"
    assert (governor_fact([]).value, governor_fact([]).verdict) == (NOT_EXPOSED, "info")


def test_turbo_and_aslr():
    assert turbo_fact("0\n", None).verdict == "warning"  # intel_pstate: no_turbo=0, turbo on
    assert "no_turbo" in turbo_fact("0\n", None).advice
    assert turbo_fact("1\n", None).verdict == "ok"
    assert turbo_fact(None, "1\n").verdict == "warning"  # cpufreq/boost=1: boost on
    assert turbo_fact(None, "0\n").verdict == "ok"
    assert turbo_fact(None, None).value == NOT_EXPOSED
    assert aslr_fact("2\n").value == "full (2)"
    assert "setarch" in aslr_fact("2\n").advice
    assert aslr_fact(None).value == NOT_EXPOSED


def test_provenance_facts_are_flat_json_without_blas():
    prov = provenance_facts(sample_s=0.05)
    assert set(prov) == NAMES
    assert json.loads(json.dumps(prov)) == prov
    assert all(isinstance(v, str) for v in prov.values())


def test_import_and_provenance_do_not_import_numpy():
    code = ("import sys, harness.measure.system as s; a = 'numpy' in sys.modules; "
            "s.provenance_facts(sample_s=0); print(a, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.split() == ["False", "False"]
