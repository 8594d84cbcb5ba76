"""What `adh list` prints: every model, framework (each imported and checked), dataset and
built-in suite, and what a suite file declares of its own."""
from __future__ import annotations

from harness.contract.data import DATASETS, dataset_names, load_dataset
from harness.contract.frameworks import framework_lines
from harness.contract.specs import get_model, model_names
from harness.errors import DatasetError
from harness.run.suites import Suite, builtin_suites, load_suite


def format_catalogue(suite: Suite | None = None) -> str:
    """The models, frameworks, datasets and suites, one line each (print adds the last
    newline); with `suite` (a suite file), the models and datasets it declares and itself."""
    out = ["models:"]
    for name in model_names():
        out.append(f"  {name:<24} {get_model(name).description}")
    if suite:
        out += [f"  {spec.name:<24} {spec.description} (declared in {suite.source})"
                for spec in suite.models.values()]
    out.append("frameworks:")
    lines = framework_lines()
    # as wide as the longest package name (a clash's list of packages aside: it says why)
    width = max(len(package) for _, _, package, _ in lines if ", " not in package)
    for name, status, package, text in lines:
        out.append(f"  {name:<24} {status:<7} {package:<{width}} {text}")
    out.append("datasets:")
    for name in dataset_names():
        if name in DATASETS:
            out.append(f"  {name:<24} {DATASETS[name]}")
            continue
        try:
            out.append(f"  {name:<24} {load_dataset(name).source} (registered by a package)")
        except DatasetError as error:
            out.append(f"  {name:<24} broken: {error}")
    if suite:
        out += [f"  {name:<24} {file} (declared in {suite.source})"
                for name, file in suite.datasets.items()]
    out.append("suites:")
    listed = [load_suite(name) for name in sorted(builtin_suites())] + ([suite] if suite else [])
    for each in listed:
        label = each.source if each is suite else each.name
        out.append(f"  {label:<24} {len(each.cases):>4} cases  {each.description}")
    return "\n".join(out)
