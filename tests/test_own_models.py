"""Models and datasets of your own: declared in a suite file (the example of docs/models.md,
run as written), read from .npz files, or registered by a package through entry points; and
every malformed declaration refused in one line that names the file and the line."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.contract.cases import dataset_file
from harness.contract.data import load_dataset
from harness.contract.data.mnist10k import load as load_mnist10k
from harness.contract.prepared import case_spec
from harness.contract.specs import MODELS, Layer, get_model, model_names
from harness.errors import DatasetError, UsageError
from harness.results.store import ResultsStore
from harness.run.suites import load_suite
from toy_adapters import activate, build_distribution

DOCS = Path(__file__).parent.parent / "docs" / "models.md"


def documented_suite() -> str:
    """The suite file of docs/models.md, as a user copies it."""
    text = DOCS.read_text()
    return re.search(r"```toml\n(description = .*?)```", text, re.S).group(1)


def save_digits(path: Path, n_train: int = 300, n_test: int = 100) -> Path:
    """A few real digits saved as a user would: uint8 pixels, integer labels."""
    data = load_mnist10k()
    pixels = lambda x: np.round(x * 255).astype(np.uint8)  # noqa: E731
    np.savez(path, x_train=pixels(data.x_train[:n_train]), y_train=data.y_train[:n_train],
             x_test=pixels(data.x_test[:n_test]), y_test=data.y_test[:n_test])
    return path


@pytest.fixture
def own_suite(tmp_path) -> Path:
    save_digits(tmp_path / "digits.npz")
    path = tmp_path / "wide-cnn.toml"
    path.write_text(documented_suite())
    return path


def test_the_documented_suite_declares_a_model_and_a_dataset(own_suite):
    suite = load_suite(str(own_suite))
    assert "wide-cnn" not in MODELS and list(suite.models) == ["wide-cnn"]
    spec = suite.models["wide-cnn"]
    assert spec.output_shapes()[-1] == (10,) and spec.layers[2].n_out == 32
    assert suite.datasets == {"my-digits": own_suite.parent / "digits.npz"}
    assert {(c.model, c.framework) for c in suite.cases} == {
        (m, f) for m in ("cnn", "wide-cnn") for f in ("engine-static", "torch")}
    for case in suite.cases:
        assert case.dataset == "my-digits"
        assert dataset_file(case) == str(suite.datasets["my-digits"])
        assert len(case.extra.dataset_sha256 or "") == 64
        # the declared model travels in its cases; the built-in one is found by name
        assert (case.extra.spec is not None) == (case.model == "wide-cnn")
        expected = spec if case.model == "wide-cnn" else MODELS["cnn"]
        assert case_spec(case).layers == expected.layers


def test_a_changed_declaration_is_a_new_case(own_suite):
    before = {c.key("v", "") for c in load_suite(str(own_suite)).cases}
    own_suite.write_text(own_suite.read_text().replace("n_out = 120", "n_out = 100")
                         .replace("n_in = 120", "n_in = 100"))
    after = {c.key("v", "") for c in load_suite(str(own_suite)).cases}
    assert len(before & after) == 2  # the built-in cnn's cases only


@pytest.mark.slow
def test_adh_runs_and_reports_the_documented_suite(own_suite, tmp_path, capsys):
    store = tmp_path / "store.sqlite"
    assert main(["run", str(own_suite), "--frameworks", "engine-static", "--rounds", "1",
                 "--no-memory", "--no-progress", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "\nwide-cnn\n" in out and "\ncnn\n" in out
    assert "2 cases run, 0 skipped (--resume), 0 failed" in out
    with ResultsStore(store) as results:
        cases = results.cases("wide-cnn")
    assert set(cases["status"]) == {"ok"}
    assert set(cases["prov_dataset_checksum"]) == {load_suite(str(own_suite)).cases[0]
                                                        .extra.dataset_sha256}
    assert main(["report", "wide-cnn", "--store", str(store), "--out", str(tmp_path / "r")]) == 0
    report = (tmp_path / "r" / "report.md").read_text()
    assert "wide-cnn" in report and "my-digits" in report


def test_check_and_list_take_the_suite(own_suite, capsys):
    assert main(["list", "--suite", str(own_suite)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  wide-cnn .*declared in", out, re.M)
    assert re.search(r"^  my-digits .*digits\.npz", out, re.M)
    assert main(["check", "--suite", str(own_suite), "--models", "wide-cnn", "--frameworks",
                 "engine-static", "--steps", "3"]) == 0
    assert re.search(r"^\| wide-cnn \| engine-static .* ok", capsys.readouterr().out, re.M)


@pytest.mark.parametrize(("old", "new", "pointed", "words"), [
    # an unknown layer kind: the line of that layer
    ('{ kind = "maxpool", kernel = 2 },\n    { kind = "conv", n_in = 12',
     '{ kind = "avgpool", kernel = 2 },\n    { kind = "conv", n_in = 12', "avgpool",
     "layer 1: unknown kind 'avgpool'; choose from: dense, conv"),
    # shapes that do not chain: the dense layer's n_in is not what the flatten gives
    ("n_in = 512", "n_in = 500", "n_in = 500",
     "layer 5 (dense): takes a vector of n_in = 500 features, gets (512,)"),
    # a loss that does not fit the output: the model's table
    ('loss = "softmax_cross_entropy"', 'loss = "mse"', "[models.wide-cnn]",
     "loss mse fits one output (a 0/1 target), the last layer gives 10"),
    ("lr = 0.01\n", "", "[models.wide-cnn]", "missing lr"),
    ("[models.cnn]", "[models.cnn]\nlr = 0.1", "[models.cnn]", "'cnn' is a built-in model"),
    ('path = "digits.npz"', 'path = "digits.csv"', "[datasets.my-digits]", "no file"),
])
def test_a_malformed_declaration_is_one_line_with_file_and_line(own_suite, old, new, pointed,
                                                                words):
    text = own_suite.read_text()
    assert old in text
    own_suite.write_text(text.replace(old, new))
    with pytest.raises(UsageError) as error:
        load_suite(str(own_suite))
    message = str(error.value)
    assert "\n" not in message and words in message
    line = next(number for number, text in enumerate(own_suite.read_text().splitlines(), 1)
                if pointed in text)
    assert message.startswith(f"{own_suite}, line {line} ")


@pytest.mark.parametrize(("arrays", "words"), [
    ({"x_train": np.zeros((4, 784)), "y_train": np.zeros(4, int)}, "lacks x_test, y_test"),
    ({"x_train": np.zeros((4, 784)), "y_train": np.zeros(3, int), "x_test": np.zeros((2, 784)),
      "y_test": np.zeros(2, int)}, "x_train has 4 examples, y_train 3"),
    ({"x_train": np.zeros((4, 784)), "y_train": np.zeros(4), "x_test": np.zeros((2, 784)),
      "y_test": np.zeros(2, int)}, "y_train must be integer class indices"),
])
def test_a_malformed_dataset_file_says_what_is_wrong(tmp_path, arrays, words):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(DatasetError, match=re.escape(words)):
        load_dataset("bad", file=tmp_path / "bad.npz")
    (tmp_path / "noise.npz").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="not a readable .npz file"):
        load_dataset("noise", file=tmp_path / "noise.npz")


def test_a_dataset_that_does_not_fit_the_model_stops_the_plan(tmp_path, capsys):
    data = load_mnist10k()
    np.savez(tmp_path / "twenty.npz", x_train=data.x_train[:200].reshape(200, -1)[:, :400],
             y_train=data.y_train[:200] + 10, x_test=data.x_test[:50].reshape(50, -1)[:, :400],
             y_test=data.y_test[:50])
    assert main(["run", "quick", "--dataset", str(tmp_path / "twenty.npz"), "--models", "mlp",
                 "--frameworks", "engine-static", "--dry-run",
                 "--store", str(tmp_path / "s.sqlite")]) == 2
    err = "".join(capsys.readouterr())
    assert "dataset 'twenty' has 400 features per example, model 'mlp' takes 784" in err
    assert "the labels of dataset 'twenty' run from 0 to 19, and model 'mlp' has 10 classes" in err


def test_dataset_path_runs_a_builtin_suite_on_your_file(tmp_path):
    save_digits(tmp_path / "digits.npz")
    suite = load_suite("quick", {"dataset": str(tmp_path / "digits.npz"), "models": ["mlp"]})
    assert {c.dataset for c in suite.cases} == {"digits"}
    data = load_dataset("digits", file=dataset_file(suite.cases[0]))
    assert data.x_train.dtype == np.float32 and 0 <= data.x_train.min() <= data.x_train.max() <= 1
    assert data.n_classes == 10 and data.source.endswith("digits.npz")


def test_a_missing_dataset_file_is_one_line_and_exit_2(tmp_path, capsys):
    """`adh run quick --dataset missing.npz --dry-run`: the file named, no traceback."""
    missing = tmp_path / "missing.npz"
    assert main(["run", "quick", "--models", "mlp", "--dataset", str(missing), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert f"--dataset {missing}: no file {missing}" in err and "Traceback" not in err


PLUGIN = '''
import numpy as np
from harness.contract.data import Dataset
from harness.contract.data.dataset import arrays_checksum
from harness.contract.specs import ModelSpec, dense

TINY = ModelSpec("ignored", "a tiny dense net", (784,), (dense(784, 10),),
                 loss="softmax_cross_entropy", optimizer="sgd", lr=0.1)

def load(dtype):
    rng = np.random.default_rng(0)
    x, y = rng.random((20, 784)).astype(dtype), rng.integers(0, 10, 20)
    return Dataset("noise", x, y, x[:5], y[:5], 10, arrays_checksum({"x": x}), "generated")
'''


def test_packages_register_models_and_datasets(tmp_path, monkeypatch):
    dist = build_distribution(tmp_path / "site", name="toy_models",
                              modules={"toy_models.py": PLUGIN}, entries={}, groups={
                                  "autodiff_harness.models": {"tiny": "toy_models:TINY"},
                                  "autodiff_harness.datasets": {"noise": "toy_models:load"}})
    activate(monkeypatch, dist, tmp_path / "cache")
    assert "tiny" in model_names()
    spec = get_model("tiny")
    assert spec.name == "tiny" and spec.layers == (Layer("dense", 784, 10),)
    assert load_dataset("noise", dtype=np.float64).x_train.dtype == np.float64
    suite = load_suite("quick", {"models": ["tiny"], "dataset": "noise"})
    assert {(c.model, c.dataset) for c in suite.cases} == {("tiny", "noise")}
