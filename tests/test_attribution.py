"""Op groups that mean the same for every framework, and where a ratio's gap goes."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.contract.profiling import OpCall, ProfiledStep
from harness.contract.specs import MODELS
from harness.measure.stats import Estimate
from harness.results.attribution import (
    OUTSIDE,
    WHOLE,
    Attribution,
    attribute,
    combined,
    gap,
    gap_line,
    op_group,
    op_kind,
)
from harness.results.attribution_tables import attribution_tables, explain_difference, runs_of

CNN_LAYERS = [layer.kind for layer in MODELS["cnn"].layers]
RNN_LAYERS = [layer.kind for layer in MODELS["rnn"].layers]


@pytest.mark.parametrize("name, phase, layers, kind", [
    # the engine's own op names
    ("Conv2d", "backward", (), "conv"), ("MaxPool2d", "forward", (), "pool"),
    ("MatMul", "forward", (), "dense"), ("RNN", "backward", (), "recurrent"),
    ("LSTM", "forward", (), "recurrent"), ("ReLU", "backward", (), "activation"),
    ("SoftmaxCrossEntropy", "forward", (), "loss"), ("Add", "forward", (), "elementwise"),
    ("Transpose", "backward", (), "layout"), ("Reshape", "forward", (), "layout"),
    ("SGD", "update", (), "update"),
    # torch's
    ("ConvolutionBackward0", "backward", (), "conv"), ("aten::conv2d", "forward", (), "conv"),
    ("aten::max_pool2d", "forward", (), "pool"),
    ("MaxPool2DWithIndicesBackward0", "backward", (), "pool"),
    ("aten::linear", "forward", (), "dense"), ("AddmmBackward0", "backward", (), "dense"),
    ("MmBackward0", "backward", (), "dense"), ("aten::rnn_tanh", "forward", (), "recurrent"),
    ("MkldnnRnnLayerBackward0", "backward", (), "recurrent"),
    ("aten::lstm", "forward", (), "recurrent"), ("ReluBackward0", "backward", (), "activation"),
    ("TanhBackward0", "backward", (), "activation"),
    ("aten::cross_entropy_loss", "forward", (), "loss"),
    ("NllLossBackward0", "backward", (), "loss"), ("LogSoftmaxBackward0", "backward", (), "loss"),
    ("TBackward0", "backward", (), "layout"), ("aten::flatten", "forward", (), "layout"),
    ("torch::autograd::AccumulateGrad", "backward", (), "layout"),
    ("aten::item", "forward", (), "layout"), ("SGD.step", "update", (), "update"),
    ("SGD.zero_grad", "update", (), "update"),
    # XLA's: by the layer its name carries, else by the op
    ("layer_2/conv_general_dilated", "backward", CNN_LAYERS, "conv"),
    ("layer_5/dot_general", "forward", CNN_LAYERS, "dense"),
    ("layer_5/transpose", "backward", CNN_LAYERS, "dense"),
    ("layer_0/reduce_sum", "backward", CNN_LAYERS, "conv"),
    ("RNN_0/while/body/closed_call/layer_0.scan_fn/layer_0/h/dot_general", "forward",
     RNN_LAYERS, "recurrent"),
    ("RNN_0/while", "forward", RNN_LAYERS, "recurrent"),
    ("ynn_fusion.3 (convolution)", "step", CNN_LAYERS, "conv"),
    ("wrapped_reduce-window (reduce-window)", "step", CNN_LAYERS, "pool"),
    ("select_and_scatter", "backward", CNN_LAYERS, "pool"),
    ("relu/max", "forward", CNN_LAYERS, "activation"),
    ("take_along_axis/scatter-add", "backward", CNN_LAYERS, "loss"),
    ("transpose_copy_fusion.2 (copy)", "step", CNN_LAYERS, "layout"),
    ("add", "update", CNN_LAYERS, "update"),
    ("some_custom_kernel", "forward", (), "other"),
    ("train_step", "step", (), "whole step"),  # a framework without a profiler (whole_steps)
])
def test_every_frameworks_op_names_read_as_what_they_compute(name, phase, layers, kind):
    assert op_kind(name, phase, layers) == kind


def test_a_group_is_its_kind_and_phase_or_the_kind_alone_where_the_phase_is_unknown():
    assert op_group(OpCall("Conv2d", "backward", 0.0, 1.0)) == "conv backward"
    assert op_group(OpCall("ynn_fusion.3 (convolution)", "step", 0.0, 1.0)) == "conv"
    assert op_group(OpCall("SGD", "update", 0.0, 1.0)) == "update"


def step(*calls: tuple[str, str, float], seconds: float) -> ProfiledStep:
    return ProfiledStep(0.0, seconds, [OpCall(n, p, 0.0, s) for n, p, s in calls])


def test_the_groups_sum_to_the_plain_step_the_profilers_cost_taken_off_in_proportion():
    """Profiled: conv 6 + update 2 + 2 outside ops = 10 ms; plain 8 ms: every group x 0.8."""
    profiled = [step(("Conv2d", "forward", 0.002), ("Conv2d", "backward", 0.004),
                     ("SGD", "update", 0.002), seconds=0.010)] * 3
    a = attribute([0.008, 0.0079, 0.0081], profiled)
    assert a.step_s == pytest.approx(0.008) and a.profiled_step_s == pytest.approx(0.010)
    assert a.seconds == pytest.approx({"conv forward": 0.0016, "conv backward": 0.0032,
                                       "update": 0.0016, OUTSIDE: 0.0016})
    assert list(a.seconds) == ["conv forward", "conv backward", "update", OUTSIDE]
    assert sum(a.seconds.values()) == pytest.approx(a.step_s)
    assert a.calls["conv forward"] == 1
    assert Attribution.from_dict(a.as_dict()) == a


def test_processes_combine_by_each_groups_median():
    one = Attribution(0.010, 0.011, {"conv forward": 0.006, OUTSIDE: 0.004},
                      {"conv forward": 1, OUTSIDE: 0})
    two = Attribution(0.012, 0.013, {"conv forward": 0.008, OUTSIDE: 0.004},
                      {"conv forward": 1, OUTSIDE: 0})
    three = Attribution(0.011, 0.012, {"conv forward": 0.007, "update": 0.001, OUTSIDE: 0.003},
                        {"conv forward": 1, "update": 1, OUTSIDE: 0})
    both = combined([one, two, three])
    assert both.step_s == pytest.approx(0.011)
    assert sum(both.seconds.values()) == pytest.approx(0.011)
    # medians 7, 0 and 4 ms, scaled by 11 / 11
    assert both.seconds == pytest.approx({"conv forward": 0.007, "update": 0.0, OUTSIDE: 0.004})


def test_the_gap_is_laid_out_group_by_group_and_sums_to_the_steps_difference():
    engine = Attribution(0.009, 0.0092, {"conv forward": 0.002, "conv backward": 0.004,
                                         "pool backward": 0.001, OUTSIDE: 0.002}, {})
    torch = Attribution(0.006, 0.0072, {"conv forward": 0.001, "conv backward": 0.002,
                                        "pool forward": 0.001, OUTSIDE: 0.002}, {})
    rows = gap(engine, torch)
    assert rows[0] == ("conv backward", pytest.approx(0.002))
    assert sum(s for _, s in rows) == pytest.approx(engine.step_s - torch.step_s)
    assert gap_line("engine-static", "cnn", engine, torch, "torch") == (
        "engine-static on cnn: +3.00 ms a step against torch: conv backward +2.00 ms, "
        "conv forward +1.00 ms, pool backward +1.00 ms, pool forward -1.00 ms")


def test_a_whole_step_is_not_laid_out_against_the_references_groups():
    """autograd's profiler sees only its whole step: its gap to torch is the steps' difference,
    not "whole step +56 ms, conv backward -5 ms", which reads as torch's groups moving."""
    whole = Attribution(0.056, 0.056, {WHOLE: 0.056, OUTSIDE: 0.0}, {})
    torch = Attribution(0.012, 0.012, {"conv forward": 0.002, "conv backward": 0.005,
                                       OUTSIDE: 0.005}, {})
    assert gap_line("autograd", "cnn", whole, torch, "torch") == (
        "autograd on cnn: +44.00 ms a step against torch, not split by op group (its profiler "
        "sees only the whole step)")


def test_a_kind_whose_phase_one_side_cannot_tell_is_compared_whole():
    jax = Attribution(0.010, 0.010, {"conv": 0.006, "conv backward": 0.001, OUTSIDE: 0.003}, {})
    torch = Attribution(0.008, 0.009, {"conv forward": 0.002, "conv backward": 0.003,
                                       OUTSIDE: 0.003}, {})
    assert dict(gap(jax, torch)) == pytest.approx({"conv": 0.002, OUTSIDE: 0.0})


def runs_frame(rows: list[tuple[str, str, dict, bool]]) -> pd.DataFrame:
    """Stored runs as `store.runs()` gives them: (model, framework, seconds by group, flagged)."""
    return pd.DataFrame([{"model": m, "framework": f, "flagged": flagged,
                          "attribution": json.dumps(Attribution(
                              sum(g.values()), sum(g.values()) * 1.1, g, {}, 10).as_dict())}
                         for m, f, g, flagged in rows])


ENGINE = {"conv forward": 0.002, "conv backward": 0.004, OUTSIDE: 0.001}
TORCH = {"conv forward": 0.001, "conv backward": 0.002, OUTSIDE: 0.0025}
CNN_RUNS = runs_frame([
    ("cnn", "engine-static", ENGINE, False),
    ("cnn", "engine-static", {**ENGINE, "conv backward": 0.005}, False),
    ("cnn", "engine-static", {"conv forward": 0.009, "conv backward": 0.009}, True),  # left out
    ("cnn", "torch", TORCH, False), ("cnn", "torch", TORCH, False)])


def test_the_tables_lay_each_frameworks_step_out_by_group_and_say_where_the_gap_goes():
    steps = {("cnn", "engine-static"): Estimate(0.0075, 0.0070, 0.0080, 2),
             ("cnn", "torch"): Estimate(0.0062, 0.0058, 0.0066, 2)}  # its attributed: 5.5 ms
    text = attribution_tables(CNN_RUNS, steps)
    lines = text.splitlines()
    assert lines[0] == ("cnn: where the step goes (ms a step, by op group; median over up to 2 "
                        "processes)")  # the flagged run is left out: two clean ones remain
    assert "| conv              | 6.50 (2.00 + 4.50) | 3.00 (1.00 + 2.00) |" in lines
    assert "| step, attributed  | 7.50               | 5.50               |" in lines
    assert "| step, profiled    | 8.25               | 6.05               |" in lines
    assert ("- engine-static on cnn: +2.00 ms a step against torch: conv backward +2.50 ms, "
            "outside ops -1.50 ms, conv forward +1.00 ms") in lines
    # Markdown ends a table at a blank line only: one around it, the lines below a list
    table = [i for i, line in enumerate(lines) if line.startswith("|")]
    assert lines[table[0] - 1] == "" and lines[table[-1] + 1] == ""
    assert any(line.startswith("- torch on cnn: its attributed step (5.50 ms, the timed steps "
                               "of the processes that attributed) lies outside its table step's "
                               "95% CI (5.80-6.60 ms)") for line in lines)
    assert not any(line.startswith("- engine-static on cnn: its attributed") for line in lines)
    assert text.endswith("elementwise and layout backward).") and "its last 10 steps" in text
    assert attribution_tables(CNN_RUNS.assign(attribution=None), steps) == ""
    # a suite that attributes in one round (quick): one process each, not a median of "1 processes"
    one = attribution_tables(CNN_RUNS.iloc[[0, 3]], steps).splitlines()[0]
    assert one == "cnn: where the step goes (ms a step, by op group; one process each)"


def test_two_result_sets_are_explained_op_group_by_op_group():
    """The Xeon/EPYC question: the engine's step hardly moved, torch's grew; which of its ops?"""
    slower_torch = runs_frame([
        ("cnn", "engine-static", {"conv forward": 0.002, "conv backward": 0.0045,
                                  OUTSIDE: 0.001}, False),
        ("cnn", "torch", {"conv forward": 0.002, "conv backward": 0.002, "pool forward": 0.001,
                          OUTSIDE: 0.002}, False)])
    text = explain_difference(CNN_RUNS, slower_torch, ("xeon.sqlite", "epyc.sqlite"))
    assert text.splitlines() == [
        "Where the steps of xeon.sqlite (BASE) and epyc.sqlite (NEW) differ, by op group (each "
        "attributed step: the median over its processes):",
        "cnn:",
        "  engine-static: 7.50 -> 7.50 ms (+0.00); its step over torch's 1.36x -> 1.07x: no "
        "group moved by 0.01 ms",
        "  torch: 5.50 -> 7.00 ms (+1.50): conv forward +1.00 ms, pool forward +1.00 ms, "
        "outside ops -0.50 ms"]


def test_a_result_sets_runs_get_their_cases_model_and_framework():
    cases = pd.DataFrame({"id": [0, 1], "model": ["cnn", "cnn"], "framework": ["torch", "jax"]})
    runs = pd.DataFrame({"case_id": [0, 1], "run": [0, 0], "contended": [False, True],
                         "drift": [False, False], "attribution": ["{}", None]})
    named = runs_of(cases, runs)
    assert list(named["framework"]) == ["torch", "jax"] and list(named["flagged"]) == [False, True]
    assert runs_of(cases, runs.drop(columns="attribution")).empty  # a store from before
