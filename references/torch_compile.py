"""The PyTorch reference under torch.compile (TorchInductor, default mode), on the CPU.

The model, the weights, the loss and the optimizer are references/pytorch.py's (TorchFramework);
this subclass compiles what a user compiling a model would, in torch.compile's default mode:
- the model's outputs and the loss of them: one graph, whose backward AOTAutograd derives and
  Inductor compiles too (loss.backward() runs it);
- the model's forward pass for `predict`, a graph of its own (no autograd).
Compilation happens inside the first step (and the first `predict`), which the harness reports
as warm-up (harness/measure/warmup.py), apart from the steady steps.

What is not compiled, and why:
- the optimizer step (torch.optim's, eager as in TorchFramework). Compiled, it saved about
  0.02 ms a step on the MLP (0.08 ms against 0.10: about 1 % of a step), cost a second
  compilation (SGD's first step makes the momentum buffers, so its later steps are another
  graph), and computes something else for Adam: traced, Adam's step count is a float32 tensor,
  so its bias corrections are taken in float32 (1 - 0.999 ** t loses five digits to
  cancellation), a relative change of about 1e-5 in the update that float64 parity
  (harness/run/check.py) rejects: it is not the contract's formula;
- nn.RNN: Dynamo does not trace RNN modules (unless torch._dynamo.config.allow_rnn, an
  experimental switch, is set), so the graph breaks there and the recurrence runs eagerly as in
  TorchFramework; on the RNN model the dense layer and the loss are compiled. That is what a
  user of torch.compile gets by default.

Inductor's on-disk caches: every process compiles into a fresh directory of its own
(TORCHINDUCTOR_CACHE_DIR, set when this module is imported, whatever it was before, and removed
at exit). By default Inductor keeps its compiled graphs, kernels and AOTAutograd artifacts in
one directory per user (/tmp/torchinductor_USER) across processes, so a process's compile time
would depend on what ran before it on the machine (a warm cache skips most of the work): the
first run of a case would pay for compilation and later rounds would not. With a fresh directory
every measured process pays the cold compilation a user pays the first time they run a model;
within a process the cache works as usual (a second framework of the same model in the same
process, as `adh check` builds, finds the first one's graphs). One artifact stays shared: the
precompiled C++ headers, which Inductor keeps in its per-user directory whatever the variable
says, by design (they belong to the compiler and its flags, not to a model; torch's own
fresh_cache() keeps them too). The first process on a machine builds them, some seconds more of
its first step (about 7 s of 26 on a busy 2-core machine for the MLP); the later ones do not.

Recompilation: the training graph is compiled with dynamic=False, specialized to the batch it
first sees. The contract makes every training batch spec.batch_size examples (an incomplete last
batch is dropped), so a case compiles it once; static shapes are what Inductor generates its best
code for, and dynamic=False also stops Dynamo's automatic dynamic shapes from turning it
symbolic after a second shape. The graph of `predict` marks its batch dimension dynamic from the
start, so that evaluation chunks of any size (1000 examples, then a shorter last one) share one
graph. Each framework calls torch.compiler.reset() when it is built, so that it starts from what
a fresh process has: Dynamo keeps at most `recompile_limit` (8) compiled versions of a function,
and runs it eagerly after that, with one warning, which in a process that builds many frameworks
(the conformance kit: every model in both dtypes, four frameworks each) would leave later models
uncompiled. A framework built earlier in the same process and used again afterwards compiles
again.

Threads: the C++ kernels Inductor generates use torch's intra-op thread count, which
TorchFramework pins to `threads`; Inductor's pool of compile workers is sized to `threads` too,
like every pool of a library (docs/plugin-contract.md#threads).
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections import Counter

import torch
import torch._dynamo
import torch._inductor.config
from torch._dynamo.utils import counters

from harness.contract.frameworks.base import COMPILED, eager_after
from references.pytorch import TorchFramework

# Set before anything is compiled: Inductor reads the variable each time it opens its cache.
INDUCTOR_CACHE_DIR = tempfile.mkdtemp(prefix="adh-torchinductor-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = INDUCTOR_CACHE_DIR
atexit.register(shutil.rmtree, INDUCTOR_CACHE_DIR, ignore_errors=True)


class TorchCompileFramework(TorchFramework):
    """TorchFramework with its loss (forward and backward) and its prediction compiled by
    torch.compile in `mode` (None: the default mode; a subclass may name another)."""

    name = "torch-compile"
    mode: str | None = None
    description = f"PyTorch {torch.__version__} torch.compile (Inductor, default mode), CPU"

    def __init__(self, spec, weights, dtype, threads) -> None:
        torch.compiler.reset()  # see the module docstring: each framework compiles afresh
        torch._inductor.config.compile_threads = threads
        self._breaks_before = Counter(counters["graph_break"])  # Dynamo's, since the process began
        super().__init__(spec, weights, dtype, threads)
        # super()'s bound methods: the compiled graphs are of TorchFramework's computation.
        self._compiled_loss = torch.compile(super()._loss_and_outputs, mode=self.mode,
                                            dynamic=False)
        self._compiled_forward = torch.compile(self._forward, mode=self.mode)

    def _loss_and_outputs(self, x: torch.Tensor,
                          y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self._compiled_loss(x, y)

    def differentiation(self) -> str:
        """Traced and compiled, or "eager after N graph breaks" where Dynamo broke the step's
        graph (the RNN's recurrence: the rest of the step ran eagerly, autograd through
        primitives), counted from Dynamo's own counters over this framework's steps."""
        breaks = sum((Counter(counters["graph_break"]) - self._breaks_before).values())
        return eager_after(breaks) if breaks else COMPILED

    def facts(self) -> dict[str, str | int | float]:
        """How often Dynamo broke the graphs of this framework so far, and why: what ran eagerly
        (nn.RNN's recurrence on the RNN model, above)."""
        breaks = Counter(counters["graph_break"]) - self._breaks_before
        facts: dict[str, str | int | float] = {"graph breaks": sum(breaks.values())}
        if breaks:
            facts["ran eagerly"] = "; ".join(  # Dynamo's reason, its first sentence
                " ".join(reason.split()).split(" Explanation:")[0][:80] for reason in breaks)
        return facts

    def predict(self, x):
        inputs = torch.from_numpy(x)
        # One graph for every number of examples; maybe_: a chunk of one example is no error.
        torch._dynamo.maybe_mark_dynamic(inputs, 0)
        with torch.no_grad():
            return self._compiled_forward(inputs).numpy()
