"""`adh list`: every model, framework, dataset and built-in suite, each framework checked."""
from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from harness.contract.data import DATASETS, dataset_names, load_dataset
    from harness.contract.specs import get_model, model_names
    from harness.errors import DatasetError
    from harness.run.suites import builtin_suites, load_suite

    suite = load_suite(args.suite) if args.suite else None
    print("models:")
    for name in model_names():
        print(f"  {name:<24} {get_model(name).description}")
    for spec in (suite.models.values() if suite else ()):
        print(f"  {spec.name:<24} {spec.description} (declared in {suite.source})")
    print("frameworks:")
    lines = framework_lines()
    # as wide as the longest package name (a clash's list of packages aside: it says why)
    width = max(len(package) for _, _, package, _ in lines if ", " not in package)
    for name, status, package, text in lines:
        print(f"  {name:<24} {status:<7} {package:<{width}} {text}")
    print("datasets:")
    for name in dataset_names():
        if name in DATASETS:
            print(f"  {name:<24} {DATASETS[name]}")
            continue
        try:
            print(f"  {name:<24} {load_dataset(name).source} (registered by a package)")
        except DatasetError as error:
            print(f"  {name:<24} broken: {error}")
    for name, file in (suite.datasets.items() if suite else ()):
        print(f"  {name:<24} {file} (declared in {suite.source})")
    print("suites:")
    listed = [load_suite(name) for name in sorted(builtin_suites())] + ([suite] if suite else [])
    for each in listed:
        label = each.source if each is suite else each.name
        print(f"  {label:<24} {len(each.cases):>4} cases  {each.description}")
    return 0


def framework_lines() -> list[tuple[str, str, str, str]]:
    """(name, status, package and version, description) of every registered framework, each
    imported and checked: status "broken" when it cannot be used, the description then the
    reason, in one line."""
    from harness.contract.frameworks import FrameworkError, clash_reason, load, registrations

    lines = []
    for name, found in registrations().items():
        packages = ", ".join(r.package for r in found)
        if len(found) > 1:
            lines.append((name, "broken", packages, clash_reason(found)))
            continue
        try:
            description = load(found[0]).description
        except FrameworkError as error:
            lines.append((name, "broken", packages, " ".join(error.reason.split())))
        else:
            lines.append((name, "ok", packages, description or "-"))
    return lines
