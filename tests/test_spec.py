"""`adh spec`: a model as an adapter's author needs it, as text and as JSON (ModelSpec.as_dict),
and the one-line error for an unknown model."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.contract.specs import MODELS, ModelSpec, Parameter, SpecError, spec_from_table


@pytest.mark.parametrize("name", MODELS)
def test_spec_names_every_parameter_with_its_shape(name, capsys):
    assert main(["spec", name]) == 0
    out = capsys.readouterr().out
    spec = MODELS[name]
    assert out.startswith(f"{name}: {spec.description}\n")
    rows = {cells[0]: cells[1:] for cells in
            ([c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()
             if line.startswith("| "))}
    for p in spec.parameters():
        assert rows[p.name] == [str(p.shape), str(p.fan_in), str(p.fan_out), p.init]
    for i, layer in enumerate(spec.layers):
        assert rows[str(i)][0] == layer.kind
    assert f"optimizer   {spec.optimizer}: lr {spec.lr}" in out


@pytest.mark.parametrize("name", MODELS)
def test_spec_json_round_trips_and_matches_the_parameters(name, capsys):
    assert main(["spec", name, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    spec = MODELS[name]
    assert record == spec.as_dict()
    assert tuple(Parameter(p["name"], tuple(p["shape"]), p["fan_in"], p["fan_out"], p["init"])
                 for p in record["parameters"]) == spec.parameters()
    assert [(layer["index"], layer["kind"]) for layer in record["layers"]] == [
        (i, layer.kind) for i, layer in enumerate(spec.layers)]
    assert tuple(record["input_shape"]) == spec.input_shape
    assert record["optimizer"]["name"] == spec.optimizer and record["optimizer"]["lr"] == spec.lr
    assert (record["loss"], record["batch_size"], record["epochs"], record["dataset"]) == (
        spec.loss, spec.batch_size, spec.epochs, spec.dataset)


def test_spec_json_has_the_documented_keys(capsys):
    """The keys docs/plugin-contract.md lists for `adh spec --json`."""
    assert main(["spec", "cnn", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert list(record) == ["name", "description", "input_shape", "layers", "loss", "optimizer",
                            "batch_size", "epochs", "dataset", "parameters"]
    conv, pool, _, _, flat, *_ = record["layers"]
    assert conv == {"index": 0, "kind": "conv", "n_in": 1, "n_out": 6, "kernel": 5, "stride": 1,
                    "padding": 0, "act": "relu", "init": "glorot_uniform",
                    "output_shape": [6, 24, 24]}
    assert pool == {"index": 1, "kind": "maxpool", "kernel": 2, "output_shape": [6, 12, 12]}
    assert flat == {"index": 4, "kind": "flatten", "output_shape": [256]}
    assert record["optimizer"] == {"name": "sgd", "lr": 0.01, "momentum": 0.9}
    assert record["parameters"][0] == {"name": "0.weight", "shape": [6, 1, 5, 5], "fan_in": 25,
                                       "fan_out": 150, "init": "glorot_uniform"}
    assert main(["spec", "circles-tanh", "--json"]) == 0
    adam = json.loads(capsys.readouterr().out)["optimizer"]
    assert adam == {"name": "adam", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8}
    assert main(["spec", "rnn", "--json"]) == 0
    clipped = json.loads(capsys.readouterr().out)["optimizer"]
    assert clipped == {"name": "sgd", "lr": 0.01, "momentum": 0.9, "clip_norm": 2.0}
    assert ModelSpec.from_dict(json.loads(json.dumps(MODELS["rnn"].as_dict()))) == MODELS["rnn"]


def test_spec_of_an_unknown_model_names_the_choices(capsys):
    assert main(["spec", "lenet"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"adh: error: unknown model 'lenet'; choose from: {', '.join(MODELS)}\n"


def test_spec_in_a_real_process():
    adh = Path(sys.executable).with_name("adh")
    result = subprocess.run([str(adh), "spec", "rnn", "--json"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == MODELS["rnn"].as_dict()


def test_a_suite_model_may_clip_its_gradients_by_a_positive_norm():
    table = {"input_shape": [4], "layers": [{"kind": "dense", "n_in": 4, "n_out": 2}],
             "loss": "softmax_cross_entropy", "optimizer": "sgd", "lr": 0.1}
    assert spec_from_table("m", table).clip_norm == 0.0  # not clipped
    assert spec_from_table("m", {**table, "clip_norm": 1}).clip_norm == 1.0
    with pytest.raises(SpecError, match="clip_norm must be positive"):
        spec_from_table("m", {**table, "clip_norm": -1.0})
