"""Suites: the built-in files expand to the cases they describe; overrides win; a bad file is
refused with a message that names the file, the field and its line."""
from __future__ import annotations

import math
import re
import tomllib

import pytest

from harness.contract.frameworks import available
from harness.contract.specs import MODELS
from harness.errors import UsageError
from harness.run.suites import SETTINGS, SWEPT, builtin_suites, load_suite

BUILTIN = sorted(builtin_suites())


def expected_count(raw: dict, overrides: dict | None = None) -> int:
    """models x frameworks x seeds x swept values x folds, summed over the groups."""
    overrides = overrides or {}
    top = {k: v for k, v in raw.items() if k != "sweep"}
    groups = [{**top, **g, **overrides} for g in raw.get("sweep", [])] or [{**top, **overrides}]
    total = 0
    for g in groups:
        swept = math.prod(len(g[k]) if isinstance(g.get(k), list) else 1 for k in SWEPT)
        total += (len(g["models"]) * len(g["frameworks"]) * len(g.get("seeds", [0])) * swept
                  * g.get("folds", 1))
    return total


def test_the_builtin_suites_are_there():
    assert {"quick", "contest", "paper", "circles", "scaling", "ci"} <= set(BUILTIN)


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_suite_expands_to_its_cases(name):
    path = builtin_suites()[name]
    raw = tomllib.loads(path.read_text())
    suite = load_suite(name)
    assert suite.name == name and suite.source == str(path)
    assert suite.description == raw["description"] and suite.description
    assert len(suite.cases) == expected_count(raw)
    assert len({c.key("v", "") for c in suite.cases}) == len(suite.cases)  # no case twice
    assert suite.memory == raw.get("memory", True)
    assert suite.timeout_s == raw.get("timeout_s", 3600)
    for case in suite.cases:
        assert case.suite == name
        assert case.framework in available() and case.model in MODELS
        assert case.dataset == raw.get("dataset", MODELS[case.model].dataset)
        assert case.threads == raw.get("threads", 2)
        assert case.seed in raw.get("seeds", [0])
        epochs = {g["epochs"] for g in raw.get("sweep", []) if "epochs" in g}
        if "epochs" in raw:  # or a sweep's own
            assert case.epochs == raw["epochs"] or case.epochs in epochs
        assert case.train_limit == raw.get("train_limit")


def test_known_case_counts():
    counts = {name: len(load_suite(name).cases) for name in BUILTIN}
    assert counts["quick"] == 4 * 5  # models x frameworks
    assert counts["contest"] == 4 * 10
    assert counts["ci"] == 3 * 2
    assert counts["paper"] == 4 * 8 * 3  # x seeds
    assert counts["circles"] == 6 * 3 * 2 * 5  # x seeds x folds
    assert counts["circles-paper"] == 6 * 1 * 2 * 5 * 6  # x learning rates
    # batch sizes, widths, sequence lengths (rnn and lstm)
    assert counts["scaling"] == 3 * 3 * 7 + 3 * 6 + 3 * 5 * 2


def test_a_suite_declares_the_cases_it_does_not_run_and_why(tmp_path):
    """`not_run`: the case stays in the suite, recorded as n/a with the suite's reason, never
    launched; a key that names no model and framework of the suite, or no reason, is refused."""
    from harness.results.store import ResultsStore
    from harness.run.options import RunOptions
    from harness.run.runner import pending_cases

    path = tmp_path / "s.toml"
    head = 'models = ["mlp", "cnn"]\nframeworks = ["engine-static", "torch"]\n[not_run]\n'
    path.write_text(head + '"cnn/torch" = "too slow here"\n')
    suite = load_suite(str(path))
    assert len(suite.cases) == 4
    assert {(c.model, c.framework): suite.not_run_reason(c) for c in suite.cases} == {
        ("mlp", "engine-static"): None, ("mlp", "torch"): None, ("cnn", "engine-static"): None,
        ("cnn", "torch"): "not run in suite s: too slow here"}
    with ResultsStore(tmp_path / "r.sqlite") as store:
        todo, _ = pending_cases(suite, store, RunOptions())
    assert [(r.case.model, r.case.framework, r.status, r.reason) for r in todo][2:] == [
        ("cnn", "engine-static", "ok", ""),
        ("cnn", "torch", "left out", "not run in suite s: too slow here")]
    path.write_text(head + '"rnn/torch" = "why"\n')
    with pytest.raises(UsageError, match=r"s.toml, line 4 \(\[not_run\]\): 'rnn/torch' is not "
                                         r"MODEL/FRAMEWORK "
                                         r"of this suite \(models mlp, cnn; frameworks"):
        load_suite(str(path))
    path.write_text(head + '"cnn/torch" = " "\n')
    with pytest.raises(UsageError, match="'cnn/torch' needs its reason"):
        load_suite(str(path))
    paper = load_suite("paper")
    assert [(c.model, c.framework) for c in paper.cases if paper.not_run_reason(c)] == \
        [("cnn", "engine-static-unrolled")] * 3 + [("mlp", "engine-static-unrolled")] * 3 + \
        [("lstm", "tinygrad")] * 3


@pytest.mark.parametrize(("name", "frameworks", "epochs"), [
    # quick: one epoch a process, so that its minutes buy processes (harness/suites/quick.toml)
    ("quick", ("engine-static", "engine-static-unrolled", "engine-dynamic", "torch", "jax"), 1),
    ("contest", ("engine-static", "engine-dynamic", "torch", "torch-compile", "jax", "autograd",
                 "tinygrad", "tensorflow", "tensorflow-function", "pytensor"), 2)])
def test_quick_and_contest_suite_cases(name, frameworks, epochs):
    suite = load_suite(name)
    assert {(c.model, c.framework) for c in suite.cases} == {
        (m, f) for m in ("cnn", "mlp", "rnn", "lstm") for f in frameworks}
    for case in suite.cases:
        spec = MODELS[case.model]
        assert (case.epochs, case.dataset, case.batch_size, case.lr, case.optimizer) == (
            epochs, "mnist-10k", spec.batch_size, spec.lr, spec.optimizer)
        assert case.extra.momentum == spec.momentum


def test_circles_folds_and_seeds():
    suite = load_suite("circles")
    per_variant = [c for c in suite.cases if c.model == "circles-tanh" and c.framework == "torch"]
    assert sorted((c.seed, c.extra.fold) for c in per_variant) == [
        (s, f) for s in (0, 1) for f in range(5)]
    assert all(c.extra.folds == 5 for c in suite.cases)
    assert suite.memory is False


def test_scaling_sweeps():
    suite = load_suite("scaling")
    widths = sorted({c.extra.width for c in suite.cases if c.extra.width})
    assert widths == [32, 64, 128, 256, 512, 1024]
    assert {c.model for c in suite.cases if c.extra.width} == {"mlp"}
    assert {c.model for c in suite.cases if c.extra.seq_len} == {"rnn", "lstm"}
    assert sorted({c.batch_size for c in suite.cases}) == [16, 32, 64, 100, 128, 256, 512, 1024]
    # enough timed steps at the largest batches: 8,000 images / 1024 is 7 steps an epoch
    assert {c.epochs for c in suite.cases if c.batch_size >= 512} == {4}


def test_a_learning_rate_list_is_swept(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text('dataset = "circles"\nmodels = ["circles-tanh"]\n'
                    'frameworks = ["engine-static"]\nfolds = 5\nlr = [0.001, 0.01, 1]\n')
    suite = load_suite(str(path))
    assert sorted({c.lr for c in suite.cases}) == [0.001, 0.01, 1.0] and len(suite.cases) == 15
    assert {c.lr for c in load_suite("circles-paper").cases} == {0.0001, 0.0003, 0.001, 0.003,
                                                                 0.01, 0.03}
    for bad, words in (("[0.01, 0]", "must be positive"), ('["fast"]', "list of numbers")):
        path.write_text(f'models = ["mlp"]\nframeworks = ["torch"]\nlr = {bad}\n')
        with pytest.raises(UsageError, match=words):
            load_suite(str(path))


# --- overrides -----------------------------------------------------------------------------------

def test_overrides_win_over_the_file():
    suite = load_suite("quick", {"models": ["mlp"], "frameworks": ["engine-static"], "epochs": 1,
                                 "seeds": [0, 1, 2], "threads": 1, "batch_size": 50,
                                 "train_limit": 1000, "dataset": "mnist"})
    assert len(suite.cases) == 3
    for case in suite.cases:
        assert (case.model, case.framework, case.epochs, case.threads, case.batch_size,
                case.train_limit, case.dataset) == ("mlp", "engine-static", 1, 1, 50, 1000, "mnist")
    assert [c.seed for c in suite.cases] == [0, 1, 2]
    assert suite.options["epochs"] == 1


def test_overrides_change_the_case_keys():
    base, other = load_suite("ci"), load_suite("ci", {"epochs": 3})
    assert not {c.key("v", "") for c in base.cases} & {c.key("v", "") for c in other.cases}


def test_a_models_override_picks_among_each_sweeps_models():
    mlp = load_suite("scaling", {"models": ["mlp"]})
    assert {c.model for c in mlp.cases} == {"mlp"}
    assert len(mlp.cases) == 3 * 7 + 3 * 6  # the batch-size sweep and the width sweep
    assert not any(c.extra.seq_len for c in mlp.cases)
    rnn = load_suite("scaling", {"models": ["rnn"], "frameworks": ["torch"]})
    assert len(rnn.cases) == 7 + 5 and {c.framework for c in rnn.cases} == {"torch"}
    with pytest.raises(UsageError, match="no sweep of this suite has the models circles-tanh"):
        load_suite("scaling", {"models": ["circles-tanh"]})


@pytest.mark.parametrize("overrides, words", [
    ({"models": ["lenet"]}, ["--models", "unknown model 'lenet'", "choose from: cnn, mlp, rnn"]),
    ({"frameworks": ["caffe"]},
     ["--frameworks", "unknown framework 'caffe'",
      "engine-static, engine-dynamic, engine-static-unrolled, torch"]),
    ({"dataset": "cifar"}, ["--dataset", "unknown dataset 'cifar'", "mnist-10k"]),
    ({"epochs": 0}, ["--epochs", "at least 1"]),
    ({"threads": 0}, ["--threads", "at least 1"]),
    ({"seeds": []}, ["--seeds", "must not be empty"]),
])
def test_bad_overrides_are_refused(overrides, words):
    with pytest.raises(UsageError) as error:
        load_suite("quick", overrides)
    message = str(error.value)
    assert all(w in message for w in words), message
    assert "quick.toml" not in message  # the file is not to blame
    assert "\n" not in message


# --- invalid suite files -------------------------------------------------------------------------

GOOD = 'description = "d"\nmodels = ["mlp"]\nframeworks = ["engine-static"]\n'


def refused(tmp_path, text: str, overrides=None) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as error:
        load_suite(str(path), overrides)
    message = str(error.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    return message


def test_a_good_file_loads(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD + "epochs = 1\nlr = 1\n")
    suite = load_suite(str(path))
    assert suite.name == "good" and len(suite.cases) == 1
    assert suite.cases[0].lr == 1.0 and isinstance(suite.cases[0].lr, float)


def test_unknown_field(tmp_path):
    message = refused(tmp_path, GOOD + "epochz = 2\n")
    assert ", line 4:" in message and "unknown field 'epochz'" in message
    assert "valid fields: " + ", ".join(SETTINGS) in message


@pytest.mark.parametrize("line, words", [
    ('epochs = "2"', ["field 'epochs' must be an integer", "got '2'"]),
    ("epochs = 2.5", ["field 'epochs' must be an integer"]),
    ("epochs = true", ["field 'epochs' must be an integer"]),
    ('lr = "fast"', ["field 'lr' must be a number"]),
    ("memory = 1", ["field 'memory' must be true or false"]),
    ('threads = [1, 2]', ["field 'threads' must be an integer"]),
    ('seeds = ["a"]', ["field 'seeds' must be a list of integers"]),
    ('seeds = [true]', ["field 'seeds' must be a list of integers"]),
    ("seeds = [-1]", ["field 'seeds' must be at least 0"]),
    ('batch_size = [16, "x"]', ["field 'batch_size' must be a list of integers"]),
    ("batch_size = 0", ["field 'batch_size' must be at least 1"]),
    ("threads = 0", ["field 'threads' must be at least 1"]),
    ("epochs = 0", ["field 'epochs' must be at least 1"]),
    ("train_limit = -5", ["field 'train_limit' must be at least 1"]),
    ("folds = 1", ["field 'folds' must be at least 2"]),
    ("timeout_s = 0", ["field 'timeout_s' must be at least 1"]),
    ("lr = 0", ["field 'lr' must be positive"]),
    ('dtype = "float16"', ["unknown dtype 'float16'", "float32, float64"]),
])
def test_wrong_values_name_the_field_and_line(tmp_path, line, words):
    message = refused(tmp_path, GOOD + line + "\n")
    assert ", line 4:" in message
    assert all(w in message for w in words), message


def test_wrong_type_in_a_list_field(tmp_path):
    message = refused(tmp_path, 'models = [1]\nframeworks = ["engine-static"]\n')
    assert ", line 1:" in message and "field 'models' must be a list of strings" in message


@pytest.mark.parametrize("field, value, what, choices", [
    ("models", '["mlp", "lenet"]', "model 'lenet'", ", ".join(MODELS)),
    ("frameworks", '["engine-static", "caffe"]', "framework 'caffe'",
     "engine-static, engine-dynamic, engine-static-unrolled, torch"),
    ("dataset", '"cifar"', "dataset 'cifar'", "mnist-10k, mnist, fashion-mnist, circles"),
])
def test_unknown_names_list_the_choices(tmp_path, field, value, what, choices):
    lines = {"description": '"d"', "models": '["mlp"]', "frameworks": '["engine-static"]',
             "dataset": '"mnist-10k"'}
    lines[field] = value
    text = "".join(f"{k} = {v}\n" for k, v in lines.items())
    line = list(lines).index(field) + 1
    message = refused(tmp_path, text)
    assert f", line {line}: unknown {what}; choose from: " in message
    assert message.endswith(choices) or choices in message


def test_invalid_toml_names_the_line(tmp_path):
    message = refused(tmp_path, 'description = "d"\nmodels = ["mlp"\nframeworks = ["torch"]\n')
    assert "not valid TOML" in message
    assert re.search(r"line [23]\b", message)  # where tomllib noticed: the array's line or the next


def test_missing_models_or_frameworks(tmp_path):
    assert "needs 'models' and 'frameworks'" in refused(tmp_path, 'models = ["mlp"]\n')


def test_sweep_errors_point_at_their_own_table(tmp_path):
    text = (GOOD + "\n[[sweep]]\nmodels = [\"mlp\"]\nwidth = [32, 64]\n"
            "\n[[sweep]]\nmodels = [\"rnn\"]\nseq_len = [7, \"x\"]\n")
    message = refused(tmp_path, text)
    assert ", line 11 ([[sweep]] 2): field 'seq_len' must be a list of integers" in message
    text = GOOD + "\n[[sweep]]\nmodels = [\"mlp\"]\n\n[[sweep]]\nmodels = [\"lenet\"]\n"
    assert ", line 9 ([[sweep]] 2): unknown model 'lenet'" in refused(tmp_path, text)


def test_suite_settings_are_refused_inside_a_sweep(tmp_path):
    message = refused(tmp_path, GOOD + "\n[[sweep]]\nmodels = [\"mlp\"]\nmemory = false\n")
    assert ", line 7 ([[sweep]] 1): field 'memory' applies to the whole suite" in message


def test_a_single_bracket_sweep_is_refused(tmp_path):
    message = refused(tmp_path, GOOD + "\n[sweep]\nmodels = [\"mlp\"]\n")
    assert ", line 5: field 'sweep' must be a list" in message


def test_sweep_values_must_fit_the_model(tmp_path):
    message = refused(tmp_path, 'models = ["cnn"]\nframeworks = ["torch"]\nwidth = [32]\n')
    assert "width applies to the mlp model" in message
    message = refused(tmp_path, 'models = ["rnn"]\nframeworks = ["torch"]\nseq_len = [5]\n')
    assert "must divide 784" in message


def test_unknown_suite_lists_the_builtin_ones(tmp_path):
    builtin = "ci, circles, circles-paper, contest, optimise, paper, quick, scaling"
    with pytest.raises(UsageError, match=f"no suite .nope.*{builtin}"):
        load_suite("nope")
    with pytest.raises(UsageError, match="no suite"):
        load_suite(str(tmp_path / "missing.toml"))
