"""adh profile: the engine's op timer, torch.profiler's events, the table, the trace, FLOPs."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import engine as ad
from engine.ops.base import Op
from engine.ops.elementwise import Tanh
from engine.optim import SGD
from engine.profile import profiled
from harness.cli import main
from harness.contract.cases import Case
from harness.contract.flops import train_step_flops
from harness.contract.frameworks import get_framework
from harness.contract.profiling import OpCall, ProfiledStep
from harness.contract.specs import MODELS, get_model
from harness.contract.weights import initial_weights
from harness.errors import UsageError
from harness.report.roofline import caption as roofline_caption
from harness.report.roofline import roofline
from harness.results.profiles import (
    OVERLAP,
    PROFILE_SUFFIX,
    UNACCOUNTED,
    ProfileRow,
    SavedProfile,
    chrome_trace,
    profile_table,
    read_profiles,
)
from harness.run.profile import profile_case, profiled_steps
from references.pytorch import TorchFramework
from toy_adapters import BANDWIDTH, GEMM_PEAK


def test_the_engine_times_each_op_forward_and_backward_and_the_update():
    w = ad.Variable(np.ones((3, 4), np.float32))
    x = ad.Constant(np.ones((5, 3), np.float32))
    with profiled() as events:
        loss = ad.tanh(x @ w).sum()
        loss.backward()
        SGD([w], 0.1).step()
    assert [(e.name, e.phase) for e in events] == [
        ("MatMul", "forward"), ("Tanh", "forward"), ("Sum", "forward"),
        ("Sum", "backward"), ("Tanh", "backward"), ("MatMul", "backward"), ("SGD", "update")]
    matmul_forward, matmul_backward = events[0], events[5]
    assert matmul_forward.flops() == 2 * 5 * 3 * 4
    assert matmul_backward.flops() == 2 * 5 * 3 * 4  # x is a constant: w's gradient only
    assert events[1].flops() is None  # element-wise: not counted
    assert matmul_forward.nbytes == (5 * 3 + 3 * 4) * 4  # the inputs it reads
    assert matmul_backward.nbytes == (5 * 4 + 5 * 3 + 3 * 4) * 4  # the gradient, x and w
    assert all(e.seconds >= 0 for e in events)


def test_profiling_off_leaves_every_op_as_it_was():
    originals = {cls: (vars(cls).get("forward"), vars(cls).get("backward"))
                 for cls in (Tanh, *Op.__subclasses__())}
    step = vars(SGD)["step"]
    with profiled():
        assert vars(Tanh)["forward"] is not originals[Tanh][0]  # wrapped inside
    assert {cls: (vars(cls).get("forward"), vars(cls).get("backward"))
            for cls in originals} == originals
    assert vars(SGD)["step"] is step


def test_a_profiled_dynamic_step_takes_over_the_work_arrays_of_the_last_as_a_plain_one_does():
    """The profiler keeps each call's name and arrays, not its op: the ops of a rebuilt graph die
    with their step and hand their work arrays on (engine/ops/base.py), profiled or not."""
    x = ad.Constant(np.ones((1, 6, 6, 2), np.float32))
    w, b = ad.Variable(np.ones((3, 1, 3, 3), np.float32)), ad.Variable(np.zeros(3, np.float32))
    rows = []  # the input rows its columns are read from (a small convolution: one GEMM a row)
    with profiled():
        for _ in range(2):
            y = ad.conv2d(x, w, b)
            y.sum().backward()
            rows.append(id(y.op._buffers["rows"]))
            del y
    assert rows[0] == rows[1]


def test_an_op_run_inside_another_is_the_outer_ops_time():
    x = ad.Constant(np.ones((2, 5, 3), np.float32))
    w_x, w_h = ad.Variable(np.ones((3, 4), np.float32)), ad.Variable(np.ones((4, 4), np.float32))
    b = ad.Variable(np.zeros(4, np.float32))
    with profiled() as events:
        ad.rnn(x, w_x, w_h, b).sum().backward()
    assert [(e.name, e.phase) for e in events] == [
        ("RNN", "forward"), ("Sum", "forward"), ("Sum", "backward"), ("RNN", "backward")]
    # forward: the input projection (5 steps) and 4 recurrences; backward: the adjoint through
    # W_h, W_x's gradient and W_h's (x needs none)
    projection, recurrence = 2 * 2 * 5 * 3 * 4, 2 * 2 * 4 * 4 * 4
    assert events[0].flops() == projection + recurrence
    assert events[3].flops() == 2 * recurrence + projection


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_the_engines_flops_in_a_step_are_the_specs(model):
    spec = get_model(model)
    framework = _engine(spec)
    x, y = _batch(spec)
    framework.train_step(x, y)  # the first builds the graph, which computes its forward too
    (step,) = framework.profile_steps([(x, y)])
    assert sum(c.flops or 0 for c in step.calls) == train_step_flops(spec)


def _lstm_in_products(self, x):
    """nn.LSTM's step written out in torch products: FlopCounterMode cannot see inside the
    fused CPU kernel nn.LSTM calls, and counts none of its work."""
    lstm = self.recurrent
    h = c = torch.zeros(x.shape[0], lstm.hidden_size)
    for t in range(x.shape[1]):
        z = (x[:, t] @ lstm.weight_ih_l0.T + lstm.bias_ih_l0 + h @ lstm.weight_hh_l0.T
             + lstm.bias_hh_l0)
        i, f, g, o = z.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return h


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_specs_flops_are_torchs(model, monkeypatch):
    """harness/contract/flops.py against torch's FlopCounterMode on a forward and backward pass."""
    from references.pytorch import LastState

    spec = get_model(model)
    if model == "lstm":
        monkeypatch.setattr(LastState, "forward", _lstm_in_products)
    framework = TorchFramework(spec, initial_weights(spec, 0), "float32", 1)
    x, y = _batch(spec)
    with FlopCounterMode(display=False) as counter:
        loss, _ = framework._loss_and_outputs(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
    assert counter.get_total_flops() == pytest.approx(train_step_flops(spec), rel=0.01)


def test_torchs_fused_lstm_has_unknown_flops_not_a_partial_count():
    """torch counts no FLOPs inside oneDNN's fused LSTM layer: its rows say unknown."""
    spec = get_model("lstm")
    framework = TorchFramework(spec, initial_weights(spec, 0), "float32", 1)
    calls = framework.profile_steps([_batch(spec)] * 2)[1].calls
    lstm = [c for c in calls if c.name in ("aten::lstm", "MkldnnRnnLayerBackward0")]
    assert len(lstm) == 2 and all(c.flops is None for c in lstm)
    assert all(c.flops for c in calls if c.name == "aten::linear")  # the dense layer's counted


def test_torch_steps_split_into_forward_backward_and_update():
    spec = get_model("cnn")
    framework = TorchFramework(spec, initial_weights(spec, 0), "float32", 1)
    steps = framework.profile_steps([_batch(spec)] * 2)
    assert len(steps) == 2
    phases = {(c.name, c.phase) for c in steps[1].calls}
    assert ("aten::conv2d", "forward") in phases
    assert ("ConvolutionBackward0", "backward") in phases
    assert ("SGD.step", "update") in phases
    conv = [c for c in steps[1].calls if c.name == "aten::conv2d"]
    assert len(conv) == 2 and all(c.flops for c in conv)
    # every matrix product and convolution counted, the convolutions' backward too (which
    # torch.profiler does not count; torch's FlopCounterMode formula does): the spec's FLOPs
    counted = framework.profile_steps([_batch(spec)])[0]
    assert sum(c.flops or 0 for c in counted.calls) == pytest.approx(train_step_flops(spec),
                                                                     rel=0.01)
    # the bytes conv2d reads: input, weight and bias, as the engine's Conv2d counts them
    x, _ = _batch(spec)
    w, b = (p.detach().numpy() for p in framework.model[0][0].parameters())
    assert conv[0].bytes == x.nbytes + w.nbytes + b.nbytes
    assert sum(c.seconds for c in steps[1].calls) <= steps[1].seconds


def test_the_table_gives_each_op_per_step_and_what_no_op_accounts_for():
    steps = [ProfiledStep(0.0, 0.010, [OpCall("MatMul", "forward", 0.0, 0.004, 4e6),
                                       OpCall("MatMul", "forward", 0.004, 0.002, 2e6),
                                       OpCall("ReLU", "backward", 0.006, 0.001)]),
             ProfiledStep(1.0, 0.012, [OpCall("MatMul", "forward", 1.0, 0.006, 6e6),
                                       OpCall("ReLU", "backward", 1.006, 0.003)])]
    rows = profile_table(steps, step_s=0.008)
    assert [(r.name, r.phase) for r in rows] == [("MatMul", "forward"), ("ReLU", "backward"),
                                                 (UNACCOUNTED, "")]
    matmul, relu, rest = rows
    assert matmul.calls_per_step == 1.5 and matmul.seconds == pytest.approx(0.006)
    assert matmul.flops == 6e6 and matmul.gflops_per_s() == pytest.approx(1.0)
    assert matmul.share == pytest.approx(0.75)
    assert relu.seconds == pytest.approx(0.002) and relu.flops is None
    assert rest.seconds == pytest.approx(0.003)  # 10 - 7 ms and 12 - 9 ms


def test_what_no_op_accounts_for_counts_calls_on_two_threads_at_once_once():
    """XLA runs independent instructions at once: 0-4 ms and 2-5 ms cover 5 ms of the 10, not
    7; their rows hold 2-4 ms twice, which a row of their overlap takes back, so that the rows
    sum to the profiled step."""
    steps = [ProfiledStep(0.0, 0.010, [OpCall("dot", "forward", 0.0, 0.004),
                                       OpCall("conv", "forward", 0.002, 0.003),
                                       OpCall("relu", "forward", 0.008, 0.001)])]
    rows = profile_table(steps, step_s=0.010)
    assert [r.name for r in rows[-2:]] == [UNACCOUNTED, OVERLAP]
    assert rows[-2].seconds == pytest.approx(0.004) and rows[-1].seconds == pytest.approx(-0.002)
    assert sum(r.seconds for r in rows) == pytest.approx(0.010)


def test_the_trace_is_chrome_trace_json():
    steps = [ProfiledStep(5.0, 0.01, [OpCall("MatMul", "forward", 5.001, 0.004, 4e6, 1000)])]
    trace = json.loads(json.dumps(chrome_trace(steps, "engine-static")))
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert complete[0]["name"] == "step 0" and complete[0]["ts"] == 0
    assert complete[1] == {"name": "MatMul", "cat": "forward", "ph": "X",
                           "pid": "engine-static", "tid": 0, "ts": pytest.approx(1000),
                           "dur": pytest.approx(4000), "args": {"flops": 4e6, "bytes": 1000}}


# The rows' medians add up to the median profiled step only where the steps run at one speed:
# beside another test worker on two cores they did not (0.76 ms of rows against a 1.94 ms step).
@pytest.mark.alone
def test_a_case_profile_accounts_for_the_step():
    case = Case("profile", "mlp", "engine-static", "mnist-10k", threads=1)
    result = profile_case(case, steps=10, warmup=2, block=5)
    assert len(result.steps) == 10
    names = {r.name for r in result.rows}
    assert {"MatMul", "SoftmaxCrossEntropy", "SGD", UNACCOUNTED} <= names
    (update,) = [r for r in result.rows if r.phase == "update"]
    assert update.bytes is None  # its step takes no arrays: unknown, not 0
    # the rows, unaccounted included, are the profiled step; each row's share is of the plain
    assert sum(r.seconds for r in result.rows) == pytest.approx(result.profiled_s, rel=0.2)


def test_a_framework_without_a_profiler_is_one_row():
    case = Case("profile", "mlp", "engine-static@process", "mnist-10k", threads=1)
    result = profile_case(case, steps=4, warmup=1, block=2)
    assert [(r.name, r.phase) for r in result.rows] == [("train_step", "step"),
                                                        (UNACCOUNTED, "")]


def test_adh_profile_prints_a_table_per_framework_and_writes_traces(tmp_path, capsys):
    assert main(["profile", "mlp", "--frameworks", "engine-static", "torch", "--steps", "4",
                 "--warmup", "1", "--threads", "1", "--trace-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("| op ") == 2 and "% of GEMM peak" in out
    assert "engine-static on mlp (mnist-10k, batch 100, float32, 1 threads" in out
    for name in ("engine-static", "torch"):
        trace = json.loads((tmp_path / f"mlp-{name}.trace.json").read_text())
        assert any(e.get("cat") == "backward" for e in trace["traceEvents"])
    # and the tables, kept for adh report --profiles with the roofs (the tests' cache's)
    saved = read_profiles(tmp_path)
    assert [(p.model, p.framework) for p in saved] == [("mlp", "engine-static"), ("mlp", "torch")]
    engine_profile = saved[0]
    assert (engine_profile.gemm_peak_gflops, engine_profile.bandwidth_gbs) == (GEMM_PEAK,
                                                                               BANDWIDTH)
    assert engine_profile.settings["threads"] == 1 and engine_profile.step_s > 0
    assert engine_profile.table().splitlines()[0].startswith("| op ")
    matmul = next(r for r in engine_profile.rows if (r.name, r.phase) == ("MatMul", "forward"))
    assert matmul.flops and matmul.bytes


def test_saved_profiles_that_are_missing_or_broken_are_named(tmp_path):
    with pytest.raises(UsageError, match="no profiles .* adh profile MODEL"):
        read_profiles(tmp_path)
    (tmp_path / f"cnn-x{PROFILE_SUFFIX}").write_text("{not json")
    with pytest.raises(UsageError, match=f"cnn-x{PROFILE_SUFFIX} is not a profile"):
        read_profiles(tmp_path)


def test_the_roofline_draws_the_ops_whose_flops_and_bytes_are_known():
    rows = [ProfileRow("MatMul", "forward", 2, 0.001, 0.5, 2e8, 1e7),
            ProfileRow("ReLU", "forward", 2, 0.0005, 0.2, None, 1e6),
            ProfileRow(UNACCOUNTED, "", 0, 0.0005, 0.2, None, None)]
    profiles = [SavedProfile(model, "engine-static", {}, 0.002, 0.002, 100.0, 10.0, rows)
                for model in ("cnn", "mlp")]
    fig = roofline(profiles)
    panels = fig.axes
    assert [ax.get_title() for ax in panels] == ["cnn", "mlp"]
    (points,) = panels[0].collections  # MatMul alone: ReLU has no FLOPs
    assert points.get_offsets().tolist() == [[20.0, pytest.approx(200.0)]]  # 2e8/1e7, 2e8/1 ms
    (roof,) = panels[0].lines  # min(peak, bandwidth x intensity): the ridge at 10 FLOPs/byte
    x, y = roof.get_data()
    assert y.max() == 100.0 and y[0] == pytest.approx(10.0 * x[0])


def test_the_roofline_names_crowded_ops_without_their_names_running_into_each_other():
    # the CNN's Conv2d backward (32 FLOPs/byte, 20 GFLOP/s) sat just above torch's
    # ConvolutionBackward0 (33, 17.4): with every name over its point, the two ran together
    rows = [ProfileRow(name, "backward", 2, seconds, 0.5, 2e7, nbytes)
            for name, seconds, nbytes in (("Conv2d", 0.001, 6.25e5),
                                          ("ConvolutionBackward0", 0.00115, 6.06e5),
                                          ("MatMul", 0.00105, 6.4e5), ("Alone", 0.004, 2e5))]
    fig = roofline([SavedProfile("cnn", "engine-static", {}, 0.002, 0.002, 100.0, 10.0, rows)])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    frame = ax.get_window_extent(renderer)
    boxes = {text.get_text(): text.get_window_extent(renderer) for text in ax.texts
             if text.get_text() in {row.name for row in rows}}
    assert len(boxes) == len(rows)  # every op named once
    names = list(boxes)
    for i, first in enumerate(names):
        assert frame.x0 <= boxes[first].x0 and boxes[first].x1 <= frame.x1
        assert frame.y0 <= boxes[first].y0 and boxes[first].y1 <= frame.y1
        for second in names[i + 1:]:
            assert not boxes[first].overlaps(boxes[second]), (first, second)
    alone = next(text for text in ax.texts if text.get_text() == "Alone")
    assert (alone.get_ha(), alone.get_va()) == ("left", "bottom")  # the first side: over it


def test_a_name_with_no_free_place_is_left_out_and_the_caption_says_what_no_point_shows():
    # ten ops on one spot: the names that find no free side, near or further out, are left
    # out, never drawn over another (the reviewer's "aten::conv2d under ConvolutionBackward0")
    crowd = [ProfileRow(f"op{i}", "backward", 1, 0.001, 0.05, 2e7, 6.25e5) for i in range(10)]
    fused = ProfileRow("aten::lstm", "forward", 1, 0.004, 0.41, None, None)  # no FLOP count
    small = ProfileRow("aten::add", "forward", 1, 0.0001, 0.02, None, None)
    profiles = [SavedProfile("lstm", "torch", {}, 0.01, 0.01, 100.0, 10.0, [*crowd, fused, small])]
    fig = roofline(profiles)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    named = [t.get_window_extent(renderer) for t in ax.texts if t.get_text().startswith("op")]
    assert 0 < len(named) < len(crowd)
    assert not any(a.overlaps(b) for i, a in enumerate(named) for b in named[i + 1:])
    text = roofline_caption(profiles)
    assert "name is omitted where it would cover another's" in text
    # the panel compares only ops with FLOPs and bytes: what it leaves out is named
    assert "Not drawn, each at least 10% of its framework's step: lstm: torch aten::lstm " \
           "forward (41%)." in text
    assert "aten::add" not in text  # 2 % of the step


# a compiled step's text, cut down: XLA writes each instruction on one (long) line
HLO = "\n".join([
    "HloModule jit_step, is_scheduled=true",
    "",
    "%fused_computation.3 (param_0: f32[6,12,12,100], param_1: f32[8,8,100,16]) -> f32[6] {",
    "  %param_0 = f32[6,12,12,100]{3,2,1,0} parameter(0)",
    "  ROOT %convolution.3 = f32[6]{0} convolution(%param_0, %param_1), window={size=8x8}",
    "}",
    "",
    "ENTRY %main.1 (Arg_0.1: f32[784,128]) -> (f32[784,128]) {",
    '  %ynn_fusion.6 = f32[100,128]{1,0} fusion(%p, %q), kind=kCustom, calls=%f.6, '
    'metadata={op_name="jit(step)/jvp(SpecModel)/layer_0/dot_general" source_file="x.py"}',
    '  %ynn_fusion.2 = f32[128,64]{1,0} fusion(%a, %b), kind=kCustom, calls=%f.2, '
    'metadata={op_name="jit(step)/transpose(jvp(SpecModel))/layer_1/dot_general"}',
    '  %broadcast_maximum_fusion = f32[100,64]{1,0} fusion(%c), kind=kLoop, calls=%f.7, '
    'metadata={op_name="jit(step)/jvp(SpecModel)/jit(relu)/max"}',
    '  %multiply.4 = f32[128]{0} multiply(%d, %e), metadata={op_name="jit(step)/mul"}',
    "  %ynn_fusion.3 = f32[6]{0} fusion(%g, %h), kind=kCustom, calls=%fused_computation.3",
    "  ROOT %copy.30 = f32[784,128]{1,0} copy(%i)",
    "}"])


def test_xla_instructions_are_named_by_the_jax_op_they_compute():
    from harness.contract.profiling import xla_ops

    ops = xla_ops(HLO, "SpecModel")
    assert ops["ynn_fusion.6"] == ("layer_0/dot_general", "forward")
    assert ops["ynn_fusion.2"] == ("layer_1/dot_general", "backward")
    assert ops["broadcast_maximum_fusion"] == ("relu/max", "forward")
    assert ops["multiply.4"] == ("mul", "update")  # the optimizer's arithmetic
    # no metadata: the instruction's own name, and what the computation it calls computes
    assert ops["ynn_fusion.3"] == ("ynn_fusion.3 (convolution)", "step")
    assert ops["copy.30"] == ("copy.30", "step")


def test_xla_steps_hold_the_innermost_instructions_that_start_within_them():
    from harness.contract.profiling import xla_profiled_steps

    ops = {"while": ("RNN_0/while", "forward"), "dot": ("h/dot_general", "forward")}
    events = [{"ph": "X", "name": "adh::train_step", "tid": 1, "ts": 0.0, "dur": 100.0},
              {"ph": "X", "name": "while", "tid": 2, "ts": 10.0, "dur": 50.0},  # holds both dots
              {"ph": "X", "name": "dot", "tid": 2, "ts": 12.0, "dur": 20.0},
              {"ph": "X", "name": "dot", "tid": 2, "ts": 35.0, "dur": 20.0},
              {"ph": "X", "name": "dot", "tid": 3, "ts": 70.0, "dur": 10.0},  # alone on its thread
              {"ph": "X", "name": "ThunkExecutor::Execute", "tid": 2, "ts": 5.0, "dur": 90.0},
              {"ph": "X", "name": "dot", "tid": 2, "ts": 150.0, "dur": 5.0}]  # after the step
    (step,) = xla_profiled_steps(events, ops)
    assert (step.start_s, step.seconds) == (0.0, 100e-6)
    assert [(c.name, c.start_s, c.seconds) for c in step.calls] == [
        ("h/dot_general", 12e-6, 20e-6), ("h/dot_general", 35e-6, 20e-6),
        ("h/dot_general", 70e-6, 10e-6)]


def test_adh_profile_names_an_unknown_framework(capsys):
    assert main(["profile", "mlp", "--frameworks", "caffe"]) == 2
    assert "unknown framework 'caffe'" in capsys.readouterr().err


def _engine(spec):
    from harness.contract.frameworks.engine import EngineStatic

    return EngineStatic(spec, initial_weights(spec, 0), "float32", 1)


def _batch(spec):
    rng = np.random.default_rng(0)
    x = rng.random((spec.batch_size, *spec.input_shape), np.float32)
    if spec.loss == "mse":
        return x, rng.random((spec.batch_size, 1), np.float32)
    return x, rng.integers(0, spec.layers[-1].n_out, spec.batch_size)


def test_adh_profile_names_a_dataset_that_does_not_fit_the_model(capsys):
    assert main(["profile", "cnn", "--frameworks", "engine-static", "--dataset", "circles"]) == 2
    assert "dataset 'circles' does not fit model 'cnn'" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["engine-static", "engine-dynamic", "torch", "jax"])
def test_profiled_steps_train_as_the_same_steps_unprofiled(name):
    """The timing pass profiles the last steps of training itself: under the profiler the
    steps return the loss and outputs `train_step` would, and leave the same weights (torch's
    extra step that counts FLOPs undone)."""
    spec = get_model("mlp")
    rng = np.random.default_rng(1)
    batches = [(rng.random((spec.batch_size, *spec.input_shape), np.float32),
                rng.integers(0, spec.layers[-1].n_out, spec.batch_size)) for _ in range(3)]
    plain, profiled = (get_framework(name)(spec, initial_weights(spec, 0), "float32", 1)
                       for _ in range(2))
    expected = [(loss, outputs.copy()) for loss, outputs in (plain.train_step(x, y)
                                                             for x, y in batches)]
    profiled.train_step(*batches[0])
    steps = profiled.profile_steps(batches[1:])
    for (loss, outputs), step in zip(expected[1:], steps, strict=True):
        assert step.loss == pytest.approx(loss, rel=1e-5)
        np.testing.assert_allclose(step.outputs, outputs, rtol=1e-4, atol=1e-6)
    for key, value in plain.weights().items():
        np.testing.assert_allclose(profiled.weights()[key], value, rtol=1e-5, atol=1e-7)


def test_a_profiler_that_returns_another_count_of_steps_is_named():
    """One ProfiledStep a batch, or the batches' records would go out of line."""
    class Short(TorchFramework):
        def profile_steps(self, batches):
            return super().profile_steps(batches)[:-1]
    spec = get_model("mlp")
    framework = Short(spec, initial_weights(spec, 0), "float32", 1)
    with pytest.raises(RuntimeError, match="Short.profile_steps returned 1 steps for 2 batches"):
        profiled_steps(framework, [_batch(spec)] * 2)


def test_a_jax_trace_without_its_ops_gives_whole_steps_that_trained_once(monkeypatch):
    """Where the trace holds no instruction, each step is one call, built from the steps that
    ran (not run again): the weights are those of two plain steps."""
    import references.jax as jax_reference

    monkeypatch.setattr(jax_reference, "xla_profiled_steps", lambda events, ops: [])
    spec = get_model("mlp")
    plain, profiled = (get_framework("jax")(spec, initial_weights(spec, 0), "float32", 1)
                       for _ in range(2))
    batches = [_batch(spec)] * 2
    expected = [plain.train_step(x, y)[0] for x, y in batches]
    steps = profiled.profile_steps(batches)
    assert [[c.name for c in s.calls] for s in steps] == [["train_step (one XLA computation)"]] * 2
    assert [s.loss for s in steps] == pytest.approx(expected, rel=1e-5)
    for key, value in plain.weights().items():
        np.testing.assert_allclose(profiled.weights()[key], value, rtol=1e-5, atol=1e-7)
