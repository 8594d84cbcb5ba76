"""The harness's side of c-dense: which models it trains, and how to start it."""
from __future__ import annotations

from harness.plugin import BY_HAND, ModelSpec, ProcessFramework

from .build import executable


class CDense(ProcessFramework):
    """Dense networks only (any widths and depth, relu/tanh/sigmoid/none, both losses, SGD and
    Adam), in float32 or float64, on one thread, in a child process compiled from engine.c."""

    name = "c-dense"
    description = "dense networks in C, hand-written backward pass, one thread, out of process"
    differentiates = BY_HAND

    @classmethod
    def supports(cls, spec: ModelSpec) -> str | None:
        others = sorted({layer.kind for layer in spec.layers} - {"dense"})
        if others:
            return f"dense layers only (no {', '.join(others)})"
        return "no gradient clipping" if spec.clip_norm else None

    def start_command(self) -> list[str]:
        return [str(executable(self.dtype.name))]
