"""The plugin door: what a framework declares it supports (n/a cases), where its code comes from
(its package, version and commit: provenance and the case key), and the registry's errors for a
plugin that cannot be used (a missing dependency, an import that raises, a name taken twice),
as `get_framework` and `adh list` report them."""
from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from harness import plugin
from harness.cli import main
from harness.contract.frameworks import (
    BUILTIN,
    EXTRAS,
    FrameworkError,
    framework_origin,
    get_framework,
    registration,
)
from harness.contract.frameworks.base import Framework, why_unsupported
from harness.contract.specs import MODELS
from harness.deprecations import MOVED, message
from harness.errors import UsageError
from harness.measure.provenance import code_version
from harness.results.records import FINISHED, Status
from harness.results.store import ResultsStore
from harness.run import runner
from harness.run.options import RunOptions
from harness.run.runner import run_case, run_suite
from harness.run.suites import load_suite
from test_runner import NEVER_FLAG, fake_timing
from toy_adapters import activate, build_distribution, launches, write_suite


@pytest.fixture
def toys(toy_dist, tmp_path, monkeypatch):
    """The toy adapters visible here and in workers, passes never flagged; returns the folder
    of the adapters' markers."""
    dist, cache = toy_dist
    activate(monkeypatch, dist, cache, tmp_path / "markers")
    monkeypatch.setattr(runner, "POLICY", NEVER_FLAG)
    return tmp_path / "markers"


# --- capability: a case the framework does not support -----------------------------------------

class Plain(Framework):
    """A framework that declares nothing: it supports every spec, in every dtype of the harness."""

    def train_step(self, x, y):
        raise NotImplementedError

    def predict(self, x):
        raise NotImplementedError

    def gradients(self, x, y):
        raise NotImplementedError

    def weights(self):
        raise NotImplementedError


def test_a_framework_supports_everything_unless_it_says_otherwise(toys):
    assert all(why_unsupported(Plain, spec, dtype) is None
               for spec in MODELS.values() for dtype in ("float32", "float64"))
    dense = get_framework("toy-dense")
    assert why_unsupported(dense, MODELS["mlp"], "float32") is None
    assert why_unsupported(dense, MODELS["cnn"], "float32") == "no conv, flatten, maxpool layers"
    assert why_unsupported(dense, MODELS["mlp"], "float64") == "no float64 (runs float32)"


@pytest.mark.slow
def test_an_unsupported_case_is_finished_not_failed_and_never_built(toys, tmp_path, monkeypatch):
    suite = load_suite(str(write_suite(tmp_path, "some", ["toy-dense"], models=["mlp", "cnn"])))
    options = RunOptions(progress=False, memory=False, code_version="v1")
    with ResultsStore(tmp_path / "store.sqlite") as store:
        outcome = run_suite(suite, store, options)
        cnn = next(r for r in outcome.results if r.case.model == "cnn")
        assert [r.status for r in outcome.results] == ["ok", "unsupported"]
        assert Status.UNSUPPORTED in FINISHED
        assert cnn.reason == "no conv, flatten, maxpool layers"
        assert cnn.runs == [] and cnn.alloc_bytes is None
        assert cnn.provenance["framework"]["distribution"] == "toy_adh"  # who said no
        assert launches(toys, "toy-dense") == 1  # the mlp's; the cnn's adapter was never built
        stored = store.cases("some")
        assert dict(zip(stored["model"], stored["status"], strict=True)) == {
            "mlp": "ok", "cnn": "unsupported"}
        assert store.done_keys("some") == set(stored["key"])

        options = replace(options, resume=True)
        again = run_suite(suite, store, options)  # nothing to retry: n/a is finished
        assert again.results == [] and len(again.skipped) == 2
    assert launches(toys, "toy-dense") == 1


def test_a_dtype_the_framework_does_not_train_in_is_unsupported(toys, tmp_path):
    case = load_suite(str(write_suite(tmp_path, "f64", ["toy-dense"], dtype="float64"))).cases[0]
    result = run_case(case, RunOptions(progress=False, memory=False))
    assert (result.status, result.reason) == ("unsupported", "no float64 (runs float32)")


# --- identity: the framework's package, version and commit -------------------------------------

def test_a_builtin_framework_comes_from_this_harness():
    origin = framework_origin("engine-static")
    assert origin.distribution == "autodiff-harness"
    running = code_version()  # the checkout that runs, whatever is installed
    assert origin.code_version == (None if running == "unknown" else running)


def test_a_plugin_installed_from_git_records_that_commit(tmp_path, monkeypatch):
    sha = "0123456789abcdef0123456789abcdef01234567"
    dist = build_distribution(tmp_path, "toy_vcs", "2.0", {"toy-vcs": "toy_adh:ToyOk"}, {},
                              {"url": "https://example.org/toy.git",
                               "vcs_info": {"vcs": "git", "commit_id": sha}})
    monkeypatch.syspath_prepend(str(dist))
    origin = framework_origin("toy-vcs")
    assert origin.record() == {"distribution": "toy_vcs", "version": "2.0", "commit": sha,
                               "dirty": False, "code_version": sha}
    assert origin.key == f"toy_vcs 2.0 @{sha}"


def git(repo: Path, *args: str) -> str:
    config = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    out = subprocess.run(["git", "-C", str(repo), *config, *args], check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def test_an_editable_plugin_records_its_checkout_and_edits(tmp_path, monkeypatch):
    source = tmp_path / "checkout"
    source.mkdir()
    git(source, "init", "-q")
    (source / "adapter.py").write_text("x = 1\n")
    git(source, "add", "adapter.py")
    git(source, "commit", "-q", "-m", "one")
    sha = git(source, "rev-parse", "--short", "HEAD")
    dist = build_distribution(tmp_path / "site", "toy_editable", "0.1",
                              {"toy-editable": "toy_adh:ToyOk"}, {},
                              {"url": source.as_uri(), "dir_info": {"editable": True}})
    monkeypatch.syspath_prepend(str(dist))
    clean = framework_origin("toy-editable")
    assert (clean.commit, clean.dirty, clean.key) == (sha, False, f"toy_editable 0.1 @{sha}")
    (source / "adapter.py").write_text("x = 2\n")  # an uncommitted edit: another version
    edited = framework_origin("toy-editable")
    assert (edited.commit, edited.dirty) == (sha, True)
    assert edited.key != clean.key and edited.code_version.startswith(f"{sha}+dirty.")


def test_resume_measures_a_plugin_again_after_its_version_changed(toy_dist, tmp_path,
                                                                   monkeypatch):
    dist, cache = toy_dist
    activate(monkeypatch, dist, cache)
    # "toy-bumped" comes from a package of its own (its class from toy_adh); toy-ok from toy_adh
    bumped = tmp_path / "site"
    build_distribution(bumped, "toy_bumped", "1.0", {"toy-bumped": "toy_adh:ToyOk"}, {})
    monkeypatch.syspath_prepend(str(bumped))
    calls = []

    def worker(case, pass_name, options, on_progress=None):
        calls.append(case.framework)
        return fake_timing(case)

    monkeypatch.setattr(runner, "run_worker", worker)
    monkeypatch.setattr(runner, "POLICY", NEVER_FLAG)
    suite = load_suite(str(write_suite(tmp_path, "bump", ["toy-bumped", "toy-ok"])))
    options = RunOptions(progress=False, memory=False, code_version="v1", resume=True)
    with ResultsStore(tmp_path / "store.sqlite") as store:
        run_suite(suite, store, options)
        assert calls == ["toy-bumped", "toy-ok"]
        calls.clear()
        assert len(run_suite(suite, store, options).skipped) == 2 and calls == []

        build_distribution(bumped, "toy_bumped", "1.1", {"toy-bumped": "toy_adh:ToyOk"}, {})
        again = run_suite(suite, store, options)
        assert calls == ["toy-bumped"]  # the changed plugin only
        assert [r.case.framework for r in again.skipped] == ["toy-ok"]
        assert len(store.cases("bump")) == 3  # the old version's result is kept beside the new


# --- the registry: plugins that cannot be used ---------------------------------------------------

BROKEN_MODULES = {
    "toy_needs.py": "import toy_missing_dependency_xyz  # not installed\n",
    "toy_raises.py": "raise RuntimeError('boom at import')\n",
    "toy_half.py": "from harness.contract.frameworks.base import Framework\n\n\n"
                   "class Half(Framework):\n    def train_step(self, x, y):\n        pass\n",
}
BROKEN_ENTRIES = {
    "toy-needs": "toy_needs:Thing", "toy-raises": "toy_raises:Thing", "toy-half": "toy_half:Half",
    "toy-typo": "toy_adh:Nope", "toy-not-a-class": "toy_adh:ADAPTERS",
    "toy-gone": "toy_gone_module:Thing",
    "engine-static": "toy_adh:ToyOk",  # a built-in's name
    "toy-ok": "toy_adh:ToyError",  # the name toy_adh registers
}


@pytest.fixture
def broken(toy_dist, tmp_path, monkeypatch):
    """toy_adh and toy_broken 1.2, whose every framework cannot be used, visible here."""
    monkeypatch.syspath_prepend(str(toy_dist[0]))
    site = build_distribution(tmp_path, "toy_broken", "1.2", BROKEN_ENTRIES, BROKEN_MODULES)
    monkeypatch.syspath_prepend(str(site))


@pytest.mark.parametrize("name, message", [
    ("toy-needs", "framework 'toy-needs' from package 'toy_broken 1.2' cannot be imported: No "
                  "module named 'toy_missing_dependency_xyz'; install what toy_broken needs"),
    ("toy-gone", "framework 'toy-gone' from package 'toy_broken 1.2' cannot be imported: No "
                 "module named 'toy_gone_module'; reinstall toy_broken"),
    ("toy-raises", "framework 'toy-raises' from package 'toy_broken 1.2' cannot be imported: "
                   "RuntimeError: boom at import (raised while importing 'toy_raises': a bug in "
                   "toy_broken 1.2)"),
    ("toy-half", "framework 'toy-half' from package 'toy_broken 1.2' does not implement "
                 "gradients, predict, weights (toy_half:Half)"),
    ("toy-typo", "framework 'toy-typo' from package 'toy_broken 1.2' cannot be loaded: module "
                 "'toy_adh' has no 'Nope' (entry point 'toy_adh:Nope')"),
    ("toy-not-a-class", "framework 'toy-not-a-class' from package 'toy_broken 1.2' is not a "
                        "harness.contract.frameworks.base.Framework subclass (toy_adh:ADAPTERS)"),
])
def test_a_plugin_that_cannot_be_loaded_says_why_and_names_its_package(broken, name, message):
    with pytest.raises(FrameworkError) as error:
        get_framework(name)
    assert str(error.value) == message
    assert "torch" not in str(error.value)


def test_a_name_registered_twice_is_an_error_naming_both_packages(broken):
    with pytest.raises(UsageError) as builtin:
        get_framework("engine-static")
    assert str(builtin.value) == (
        f"framework name 'engine-static' is registered by more than one package: "
        f"'{registration('torch').package}' (built in), 'toy_broken 1.2'; uninstall all but "
        "one, or ask the plugin's authors to rename its entry point")
    with pytest.raises(UsageError) as plugins:
        framework_origin("toy-ok")  # nor can its cases get a key
    assert "'toy_adh 0.0'" in str(plugins.value) and "'toy_broken 1.2'" in str(plugins.value)


# Every optional package of every built-in framework that has some, each missing in turn.
MISSING = [(name, module) for name, extra in EXTRAS.items() for module in extra.modules]


def without(monkeypatch, name: str, module: str) -> None:
    """`import module` fails, as when it is not installed, and the built-in framework `name`
    is not imported yet."""
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.delitem(sys.modules, BUILTIN[name].partition(":")[0], raising=False)


@pytest.mark.parametrize("name, module", MISSING)
def test_a_built_in_without_its_packages_gets_the_extra_to_install(monkeypatch, name, module):
    without(monkeypatch, name, module)
    with pytest.raises(FrameworkError) as error:
        get_framework(name)
    assert str(error.value).startswith(f"framework {name!r} (built in) cannot be imported: ")
    assert str(error.value).endswith(f"; pip install 'autodiff-harness[{EXTRAS[name].name}]'")


@pytest.mark.slow
@pytest.mark.parametrize("name, module", MISSING)
def test_a_built_in_without_its_packages_is_na_with_the_install_command_and_the_rest_runs(
        monkeypatch, tmp_path, capsys, name, module):
    without(monkeypatch, name, module)
    suite = write_suite(tmp_path, "needs", ["engine-static", f"{name}@process"])
    store = tmp_path / "s.sqlite"
    assert main(["run", str(suite), "--store", str(store), "--no-progress", "--no-memory"]) == 0
    out = capsys.readouterr().out
    assert "1 cases run, 0 skipped (--resume), 0 failed, 1 not supported (n/a)" in out
    row = next(line for line in out.splitlines() if line.startswith(f"| {name}@process"))
    assert f"n/a (needs {module}, not installed: pip install " \
           f"'autodiff-harness[{EXTRAS[name].name}]')" in row


def listed_frameworks(capsys) -> dict[str, list[str]]:
    """`adh list`'s framework lines: name -> [status, the rest of the line]."""
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.split("frameworks:\n")[1].split("datasets:")[0].splitlines()
    return {line.split()[0]: line.split(maxsplit=2)[1:] for line in lines}


def test_list_imports_every_framework_and_says_which_are_broken(broken, capsys):
    listed = listed_frameworks(capsys)
    assert list(listed)[:4] == ["engine-static", "engine-dynamic", "engine-static-unrolled",
                                "torch"]
    status, rest = listed["engine-dynamic"]
    assert status == "ok" and rest.startswith("autodiff-harness")
    assert rest.endswith("the numpy engine, graph rebuilt every batch (define-by-run)")
    status, rest = listed["toy-dense"]
    assert status == "ok" and rest.startswith("toy_adh 0.0 ")
    assert rest.endswith(" toy adapter: dense layers in float32 only")  # its description
    for name in BROKEN_ENTRIES:  # none of them hides, whatever it does on import
        assert listed[name][0] == "broken", name
    status, rest = listed["toy-needs"]
    assert rest.startswith("toy_broken 1.2 ") and rest.endswith(
        " cannot be imported: No module named 'toy_missing_dependency_xyz'; "
        "install what toy_broken needs")
    assert "RuntimeError: boom at import" in listed["toy-raises"][1]
    packages = listed["toy-ok"][1].split(" is registered")[0]
    assert sorted(packages.split(", ")) == ["toy_adh 0.0", "toy_broken 1.2"]
    assert "registered by more than one package" in listed["engine-static"][1]


def test_running_a_name_registered_twice_is_a_one_line_error(broken, tmp_path, capsys):
    suite = write_suite(tmp_path, "clash", ["engine-static"])
    assert main(["run", str(suite), "--store", str(tmp_path / "s.sqlite"), "--no-progress"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("adh: error: framework name 'engine-static' is registered by more")
    assert "(built in), 'toy_broken 1.2'" in line


# Public paths are promises: a plugin written from docs/plugin-contract.md as it read before the
# harness was layered imports `harness.frameworks.base` and `harness.specs`. The template plugin,
# as that page had it written, is this one with those two lines.
TEMPLATE = Path(__file__).parents[1] / "plugins" / "template" / "adh_plugin_template"
OLD_IMPORTS = "from harness.frameworks.base import Framework\nfrom harness.specs import ModelSpec\n"


@pytest.fixture
def old_plugin(tmp_path, monkeypatch) -> Path:
    """The template plugin with the previous contract page's import lines, installed as
    adh_old_template 0.1 (framework old-numpy-mlp) on this process's path; the old paths not yet
    imported here, so that importing them warns again."""
    site = tmp_path / "site"
    (site / "adh_old_template").mkdir(parents=True)
    modules = {f"adh_old_template/{file.name}": file.read_text() for file in TEMPLATE.glob("*.py")}
    adapter = modules["adh_old_template/adapter.py"]
    new_lines = ("from harness.plugin import BY_HAND, Framework, ModelSpec\n",
                 "    differentiates = BY_HAND\n")  # the contract's words, since
    assert all(line in adapter for line in new_lines)
    modules["adh_old_template/adapter.py"] = adapter.replace(new_lines[0], OLD_IMPORTS).replace(
        new_lines[1], "").replace('name = "numpy-mlp"', 'name = "old-numpy-mlp"')
    build_distribution(site, "adh_old_template", "0.1",
                       {"old-numpy-mlp": "adh_old_template.adapter:NumpyMLP"}, modules)
    monkeypatch.syspath_prepend(str(site))
    for name in [*MOVED, *(m for m in sys.modules if m.startswith("adh_old_template"))]:
        monkeypatch.delitem(sys.modules, name, raising=False)
    return site


def test_a_plugin_importing_the_old_paths_loads_with_a_warning_naming_the_new_one(old_plugin):
    with pytest.warns(DeprecationWarning) as warned:
        adapter = get_framework("old-numpy-mlp")
    messages = [str(w.message) for w in warned]
    for old in ("harness.frameworks.base", "harness.specs"):
        assert (f"{old} is deprecated and will be removed in autodiff-harness 0.3: import from "
                "harness.plugin instead (docs/plugin-contract.md)") in messages
    assert all(w.filename.endswith("adh_old_template/adapter.py") for w in warned)  # its line
    assert issubclass(adapter, Framework) and adapter.supports(MODELS["mlp"]) is None


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="adh check compares against torch")
@pytest.mark.slow
def test_a_plugin_importing_the_old_paths_passes_adh_check(old_plugin):
    """As its author would run it: `adh check` in a process of its own, warnings shown."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(old_plugin),
                                                        os.environ.get("PYTHONPATH", "")]),
           "PYTHONWARNINGS": "always::DeprecationWarning"}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("adh")), "check", "--frameworks", "old-numpy-mlp",
         "--models", "mlp", "circles-tanh", "--steps", "5", "--test-limit", "200",
         "--threads", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed, 0 failed" in result.stdout
    assert ("DeprecationWarning: harness.frameworks.base is deprecated and will be removed in "
            "autodiff-harness 0.3: import from harness.plugin instead") in result.stderr


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_path_is_the_module_it_became(old, monkeypatch):
    for name in MOVED:  # imported fresh, so that it warns here
        monkeypatch.delitem(sys.modules, name, raising=False)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert message(old) in [str(w.message) for w in warned if w.category is DeprecationWarning]
    assert module is importlib.import_module(MOVED[old].now)
    assert module.__spec__.name == MOVED[old].now  # its own spec, not the old path's
    public = importlib.import_module(MOVED[old].import_from)
    assert public.__name__ in (MOVED[old].now, "harness.plugin")


def test_every_name_the_old_contract_page_gave_plugin_authors_is_in_harness_plugin():
    for name in ("Framework", "ProcessFramework", "ProcessError", "ModelSpec", "Layer",
                 "Parameter", "ProfiledStep", "OpCall", "targets", "predictions", "Dataset",
                 "arrays_checksum", "UsageError", "AdhError", "check_framework",
                 "parametrize_with_checks"):
        assert name in plugin.__all__ and getattr(plugin, name) is not None, name


def test_a_plugin_importing_a_harness_path_that_never_was_says_so(tmp_path, monkeypatch):
    site = build_distribution(tmp_path, "toy_future", "2.0", {"toy-future": "toy_future:Future"},
                              {"toy_future.py": "from harness.nowhere import Framework\n"})
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(FrameworkError) as error:
        get_framework("toy-future")
    assert str(error.value) == (
        "framework 'toy-future' from package 'toy_future 2.0' cannot be imported: No module named "
        "'harness.nowhere'; harness.nowhere is not a module of this autodiff-harness: the plugin "
        "must import the contract from harness.plugin (docs/plugin-contract.md), or be run with "
        "the autodiff-harness it was written for")
