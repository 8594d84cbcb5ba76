"""`adh spec`: a model's spec, as an adapter builds it."""
from __future__ import annotations

import argparse
import json

from harness import api
from harness.commands.common import refuse_misplaced


def run(args: argparse.Namespace) -> int:
    refuse_misplaced(args.model, "model", "spec")
    spec = api.get_model(args.model)
    if args.json:
        print(json.dumps(spec.as_dict(), indent=2))
        return 0
    print(api.format_spec(spec))
    return 0
