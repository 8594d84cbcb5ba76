"""Toy adapters for the conformance kit (harness.testing), registered by the toy distribution
(see __init__.py) beside those of toy_adh.py.

Each wraps the engine's dynamic mode; one declares what it cannot do, the others break one rule
of the contract each, and should fail exactly one check:
    toy-limited           declares no recurrent layers and no float64; refuses to be built for
                          either, so a kit that built it anyway would fail
    toy-late-outputs      train_step returns the outputs after its update  (outputs before update)
    toy-renamed-gradient  calls the first layer's weight gradient '0.kernel'  (parameters)
    toy-kinked-relu       relu's derivative is 1/2 at 0 where torch's is 0: a valid subgradient,
                          but not the reference's  (parity: gradients, on the CNN, whose zero
                          image borders put conv pre-activations exactly at 0)
    toy-keras-adam        Adam with Keras's eps 1e-7 instead of torch's 1e-8  (parity: the
                          trajectory, in float64; float32's looser bounds let it pass)
    toy-unordered-sums    sums over a batch in a random order each call, as GPU atomics do: equal
                          to the reference up to rounding, never twice the same  (determinism)
"""
from __future__ import annotations

import numpy as np

import engine as ad
from engine.graph import apply
from engine.ops import ReLU
from harness.contract.frameworks.engine import EngineDynamic


class ToyLimited(EngineDynamic):
    name = "toy-limited"
    description = "toy adapter: no recurrent layers, no float64"
    dtypes = ("float32",)

    @classmethod
    def supports(cls, spec) -> str | None:
        return "no recurrent layers" if any(layer.kind == "rnn" for layer in spec.layers) else None

    def __init__(self, spec, weights, dtype, threads) -> None:
        # ToyLimited's, not a subclass's: a subclass that declares less still cannot do more
        if ToyLimited.supports(spec) or str(np.dtype(dtype)) not in ToyLimited.dtypes:
            raise ValueError(f"{self.name} cannot run {spec.name} in {dtype}")
        super().__init__(spec, weights, dtype, threads)


class ToyLateOutputs(EngineDynamic):
    name = "toy-late-outputs"

    def train_step(self, x, y):
        loss, _ = super().train_step(x, y)
        return loss, self.predict(x)


class ToyRenamedGradient(EngineDynamic):
    name = "toy-renamed-gradient"

    def gradients(self, x, y):
        gradients = super().gradients(x, y)
        gradients["0.kernel"] = gradients.pop("0.weight")
        return gradients


class HalfAtKink(ReLU):
    def backward(self, g, y, x, gx):
        slope = np.where(x > 0, 1.0, np.where(x == 0, 0.5, 0.0)).astype(g.dtype)
        np.multiply(g, slope, out=gx)


def kinked_relu(x):
    return apply(HalfAtKink(), x)


class ToyKinkedRelu(EngineDynamic):
    name = "toy-kinked-relu"

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        for layer in self.model.layers:
            if isinstance(layer, ad.Dense | ad.Conv) and layer.act is ad.relu:
                layer.act = kinked_relu


class ToyKerasAdam(EngineDynamic):
    name = "toy-keras-adam"

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        if spec.optimizer == "adam":
            self.optimizer = ad.optim.Adam(self.model.parameters(), spec.lr, eps=1e-7)


class ToyUnorderedSums(EngineDynamic):
    name = "toy-unordered-sums"

    def train_step(self, x, y):
        order = np.random.default_rng().permutation(len(x))
        loss, outputs = super().train_step(x[order], y[order])
        return loss, outputs[np.argsort(order)]

    def gradients(self, x, y):
        order = np.random.default_rng().permutation(len(x))
        return super().gradients(x[order], y[order])


ADAPTERS = {cls.name: cls for cls in (ToyLimited, ToyLateOutputs, ToyRenamedGradient,
                                      ToyKinkedRelu, ToyKerasAdam, ToyUnorderedSums)}


# The catalogue of a plugin author's mistakes (tests/test_testing.py): each breaks one rule of
# docs/plugin-contract.md the way an adapter written in a hurry does, and fails the check for that
# rule with a message that names the method and the rule.

class ToyLossAfterUpdate(EngineDynamic):
    """train_step returns the loss of the weights after its update."""

    name = "toy-loss-after-update"

    def train_step(self, x, y):
        _, outputs = super().train_step(x, y)
        loss, _ = self._forward_backward(x, y)
        return loss.item(), outputs


class ToyTransposedGradients(EngineDynamic):
    """gradients() in torch's layout (out, in) instead of the canonical (in, out): of the square
    matrices only where `square_only`, whose shapes cannot tell."""

    name = "toy-transposed-gradients"
    square_only = False

    def gradients(self, x, y):
        return {name: g.T if g.ndim == 2 and (g.shape[0] == g.shape[1] or not self.square_only)
                else g for name, g in super().gradients(x, y).items()}


class ToySquareTransposed(ToyTransposedGradients):
    name = "toy-square-transposed"
    square_only = True


class ToyRecurrentTorchLayout(EngineDynamic):
    """Uses the recurrent weight as torch stores it, (out, in), where the spec's is (in, out):
    h @ W.T instead of h @ W; weights() and gradients() in the canonical layout."""

    name = "toy-recurrent-torch-layout"

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, _transposed_hh(weights), dtype, threads)

    def weights(self):
        return _transposed_hh(super().weights())

    def gradients(self, x, y):
        return _transposed_hh(super().gradients(x, y))


def _transposed_hh(arrays):
    return {name: a.T.copy() if name.endswith("weight_hh") else a for name, a in arrays.items()}


class ToyWritesGivenWeights(EngineDynamic):
    """Trains the very arrays the harness handed to __init__, in place."""

    name = "toy-writes-given-weights"

    def __init__(self, spec, weights, dtype, threads) -> None:
        super().__init__(spec, weights, dtype, threads)
        for name, p in self.model.named_parameters():
            p.value = weights[name]


class ToyLiveWeights(EngineDynamic):
    """weights() hands out the arrays the next step updates."""

    name = "toy-live-weights"

    def weights(self):
        return {name: p.value for name, p in self.model.named_parameters()}


class ToyGradientsStepTheOptimizer(EngineDynamic):
    """gradients() runs the optimizer and puts the weights back: its momentum stays."""

    name = "toy-gradients-step-the-optimizer"

    def gradients(self, x, y):
        gradients = super().gradients(x, y)
        kept = [p.value.copy() for p in self.model.parameters()]
        self.optimizer.step()
        for p, value in zip(self.model.parameters(), kept, strict=True):
            p.value[...] = value
        return gradients


class ToyGradientsCountAStep(EngineDynamic):
    """gradients() counts an Adam step (the bias correction of the next update moves)."""

    name = "toy-gradients-count-a-step"

    def gradients(self, x, y):
        gradients = super().gradients(x, y)
        for p in self.model.parameters():
            self.optimizer.steps[id(p)] = self.optimizer.steps.get(id(p), 0) + 1
        return gradients


class ToyFloat64Weights(EngineDynamic):
    """weights() in float64 whatever the run's dtype."""

    name = "toy-float64-weights"

    def weights(self):
        return {name: w.astype(np.float64) for name, w in super().weights().items()}


class ToySilentUpcast(EngineDynamic):
    """One op with a float64 constant: the outputs come out float64 in a float32 run."""

    name = "toy-silent-upcast"
    scale = np.ones(1)  # float64

    def train_step(self, x, y):
        loss, outputs = super().train_step(x, y)
        return loss, outputs * self.scale

    def predict(self, x):
        return super().predict(x) * self.scale


class ToyStaleBias(EngineDynamic):
    """The last layer's bias is never updated (left out of the optimizer's step)."""

    name = "toy-stale-bias"

    def train_step(self, x, y):
        loss, outputs = self._forward_backward(x, y)
        self.model.parameters()[-1].grad = None  # the optimizer skips a parameter without one
        self.optimizer.step()
        return loss.item(), outputs.value
