"""The adapter: the harness's Framework interface over tinygrad (the model in model.py).

Device and compiler. The model lives on tinygrad's CPU device, named explicitly (tinygrad would
otherwise pick the first device it can open, a GPU where there is one). tinygrad 0.14 renders
each kernel as C and compiles it with clang (`$CC` if set), which it runs as a program: the CPU
device cannot even open without it (it compiles its own helper programs when it starts), and
pip cannot install it. `__init__` says how to install it when it is missing.

Laziness and the JIT. Tensor operations only build a graph; `realize` schedules it into
kernels, compiles them (first time only) and runs them. Each training step (forward, loss,
backward, optimizer update, and the loss and outputs it returns) is one TinyJit function:
the first call runs it as it is, the second captures its kernels, later calls replay them on
the new inputs. A TinyJit replays one input shape, so the adapter keeps one per batch shape
(the harness's training batches have one size, but nothing here relies on it), and the same for
`predict`. `gradients` runs unjitted (it is called once). The returned loss and outputs are
copied out with `.item()` and `.numpy()`, which wait for the kernels: a step returns when it is
done.

Threads. tinygrad 0.14's CPU backend runs its kernels one after another on the calling Python
thread: a kernel's outer loop may be cut into NUM_CPU_THREADS pieces, but those pieces run one
after another too, so training uses one core whatever the thread count. Compilation runs in a
pool of PARALLEL spawned processes. Both default to the machine's CPU count; `__init__` sets
both to the harness's thread count (tinygrad's own knobs, which the BLAS/OpenMP variables do
not reach).

Compile cache. tinygrad keeps compiled kernels in an SQLite file (~/.cache/tinygrad/cache.db)
and reuses them in later processes. The adapter turns that cache off (CCACHE=0) before tinygrad
opens the CPU device, so every process compiles its kernels cold in its first steps, which the
harness counts as warm-up: without it, the first process of a run would pay for compilation and
the later ones would not, and the warm-up would depend on what ran before on the machine. Steps
after the warm-up compile nothing either way.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from importlib.metadata import version

import numpy as np
from tinygrad import Context, Device, Tensor, TinyJit
from tinygrad.helpers import CCACHE, NUM_CPU_THREADS, PARALLEL

from harness import UsageError
from harness.plugin import COMPILED, Framework, ModelSpec
from harness.plugin import Layer as LayerSpec

from .model import (
    ACTIVATIONS,
    LOSSES,
    LSTM,
    RNN,
    SGD,
    Adam,
    Conv,
    Dense,
    Flatten,
    Layer,
    MaxPool,
)

DEVICE = "CPU"
INSTALL_HINT = ("install clang (Debian/Ubuntu: apt-get install clang; Fedora: dnf install clang; "
                "macOS: xcode-select --install), or name a clang in $CC")


def open_cpu_device() -> None:
    """Open tinygrad's CPU device, or raise UsageError saying how to install its compiler."""
    compiler = os.environ.get("CC", "clang")
    if shutil.which(compiler) is None:
        raise UsageError(f"tinygrad compiles its CPU kernels with {compiler}, which is not "
                         f"installed: {INSTALL_HINT}")
    Device[DEVICE]  # opening it compiles tinygrad's own helper programs


def configure(threads: int) -> None:
    """Size tinygrad's own parallelism from the harness's thread count and turn its on-disk
    compile cache off (see the module docstring); before tinygrad opens the CPU device, since
    the device reads the cache setting when it opens."""
    NUM_CPU_THREADS.value = threads
    PARALLEL.value = threads
    CCACHE.value = 0


def build_layer(layer: LayerSpec, weights: dict[str, Tensor]) -> Layer:
    """The model.py layer for one spec layer, holding `weights` (by short name, the contract's
    layout)."""
    if layer.kind == "dense":
        return Dense(weights["weight"], weights["bias"], layer.act)
    if layer.kind == "conv":
        return Conv(weights["weight"], weights["bias"], layer.stride, layer.padding, layer.act)
    if layer.kind == "maxpool":
        return MaxPool(layer.kernel)
    if layer.kind == "flatten":
        return Flatten()
    if layer.kind == "rnn":
        return RNN(weights["weight_ih"], weights["weight_hh"], weights["bias"], layer.act)
    if layer.kind == "lstm":
        return LSTM(weights["weight_ih"], weights["weight_hh"], weights["bias"])
    raise ValueError(f"unknown layer kind {layer.kind!r}")


class Tinygrad(Framework):
    name = "tinygrad"  # the entry point's name in pyproject.toml
    description = (f"tinygrad {version('tinygrad')}: lazy Tensors, each train step one TinyJit, "
                   "clang-compiled kernels on the CPU, one thread")
    differentiates = COMPILED  # its autograd over lazy Tensors, each step one TinyJit
    dtypes = ("float32", "float64")

    @classmethod
    def supports(cls, spec: ModelSpec) -> str | None:
        """None for what the contract describes; else what is missing, which the harness shows
        as n/a (reason) instead of building the adapter."""
        for layer in spec.layers:
            if layer.kind not in ("dense", "conv", "maxpool", "flatten", "rnn", "lstm"):
                return f"no {layer.kind} layers"
            if layer.act not in ACTIVATIONS:
                return f"no {layer.act} activation"
        if spec.loss not in LOSSES:
            return f"no {spec.loss} loss"
        if spec.optimizer not in ("sgd", "adam"):
            return f"no {spec.optimizer} optimizer"
        return None

    def __init__(self, spec: ModelSpec, weights: dict[str, np.ndarray], dtype: str,
                 threads: int) -> None:
        super().__init__(spec, weights, dtype, threads)  # checks names and shapes
        configure(threads)
        open_cpu_device()
        # Copies in the run's dtype on the CPU device: the harness's arrays are never written.
        tensors = {name: Tensor(np.asarray(value, dtype=self.dtype), device=DEVICE)
                   for name, value in weights.items()}
        self.layers: list[Layer] = []
        for i, layer in enumerate(spec.layers):
            prefix = f"{i}."
            self.layers.append(build_layer(layer, {name.removeprefix(prefix): t
                                                   for name, t in tensors.items()
                                                   if name.startswith(prefix)}))
        # Canonical name -> the Tensor that holds it, and whether it is stored transposed.
        self.parameters = {f"{i}.{short}": t for i, layer in enumerate(self.layers)
                           for short, t in layer.parameters.items()}
        self.transposed = {f"{i}.{short}" for i, layer in enumerate(self.layers)
                           for short in layer.transposed}
        Tensor.realize(*self.parameters.values())
        params = list(self.parameters.values())
        self.optimizer: SGD | Adam
        if spec.optimizer == "sgd":
            self.optimizer = SGD(params, spec.lr, spec.momentum)
        else:
            self.optimizer = Adam(params, spec.lr, (spec.betas[0], spec.betas[1]), spec.eps)
        self.loss = LOSSES[spec.loss]
        # One TinyJit per input shape (see the module docstring).
        self._train_steps: dict[tuple[int, ...], Callable[..., tuple[Tensor, Tensor]]] = {}
        self._predictions: dict[tuple[int, ...], Callable[..., Tensor]] = {}

    def _forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def _step(self, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        """One training step as TinyJit captures it, from x and y on the NPY device (see
        `train_step`): the loss and outputs are realized in the same schedule as the update,
        from the weights before it."""
        self.optimizer.zero_grad()
        outputs = self._forward(x.to(DEVICE))
        loss = self.loss(outputs, y.to(DEVICE))
        loss.backward()
        if self.spec.clip_norm:  # torch.nn.utils.clip_grad_norm_, in the same schedule
            grads = [p.grad for p in self.optimizer.params if p.grad is not None]
            norm = Tensor.stack(*((g * g).sum() for g in grads)).sum().sqrt()
            scale = (self.spec.clip_norm / (norm + 1e-6)).minimum(1.0)
            for p in self.optimizer.params:
                if p.grad is not None:
                    p.grad = p.grad * scale
        with Context(TRAINING=1):  # tinygrad's optimizers refuse to step without it
            Tensor.realize(loss, outputs, *self.optimizer.schedule_step())
        return loss, outputs

    def _predict(self, x: Tensor) -> Tensor:
        return self._forward(x.to(DEVICE)).realize()

    def train_step(self, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
        step = self._train_steps.get(x.shape)
        if step is None:
            step = self._train_steps[x.shape] = TinyJit(self._step)
        # x and y enter as Tensors on tinygrad's NPY device, which wrap the arrays without a
        # copy: the step's first kernels copy them onto the CPU device. Tensor(x) on the CPU
        # device instead would make the JIT schedule and run that copy before every step, a
        # second trip through the scheduler (a quarter of an RNN step, in a profile).
        loss, outputs = step(Tensor(x, device="NPY"), Tensor(y, device="NPY"))
        return float(loss.item()), outputs.numpy()

    def predict(self, x: np.ndarray) -> np.ndarray:
        run = self._predictions.get(x.shape)
        if run is None:
            run = self._predictions[x.shape] = TinyJit(self._predict)
        return run(Tensor(x, device="NPY")).numpy()  # numpy() copies out of the JIT's buffer

    def gradients(self, x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
        # Tensor.gradient, not backward: no .grad is left on the parameters.
        loss = self.loss(self._forward(Tensor(x, device=DEVICE)), Tensor(y, device=DEVICE))
        grads = loss.gradient(*self.parameters.values())
        Tensor.realize(*grads)
        return {name: self._canonical(name, g) for name, g in zip(self.parameters, grads,
                                                                   strict=True)}

    def facts(self) -> dict[str, str | int | float]:
        """Its kernels run one after another on one thread, whatever `threads` says (above)."""
        return {"threads used": 1} if self.threads > 1 else {}

    def weights(self) -> dict[str, np.ndarray]:
        return {name: self._canonical(name, t) for name, t in self.parameters.items()}

    def _canonical(self, name: str, tensor: Tensor) -> np.ndarray:
        """A numpy copy of `tensor`, in the contract's layout for parameter `name`."""
        value = tensor.numpy()
        return np.ascontiguousarray(value.T) if name in self.transposed else value
