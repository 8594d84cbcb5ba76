"""The computational graph: constants, variables, operators, and the reverse sweep.

A `Constant` holds data fed in (inputs, labels); a `Variable` holds a trainable array and
receives a gradient; an `Operator` applies a primitive `Op` to other nodes and computes its
value as soon as it is built (define-by-run).

Two ways to run the same graph code:
- dynamic: build the graph anew for every batch, call `loss.backward()`;
- static: build it once around placeholder constants, wrap it in `Graph`, and per batch
  `feed` the placeholders, `forward()`, `backward()`. Operators then write into the arrays
  they made on the first step, so a step allocates next to nothing.
The two differ only in graph construction and allocation: every op runs the same code.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from .ops.base import Op

DEFAULT_DTYPE = np.float32


class ShapeError(ValueError):
    """An op was applied to arrays whose shapes do not fit; the message names the op and shapes."""


class Node:
    """A value in the graph. `grad` holds d(output)/d(value) after a backward sweep."""

    __slots__ = ("value", "grad", "requires_grad", "parents", "name")

    def __init__(self, value: np.ndarray, requires_grad: bool, parents: tuple[Node, ...] = (),
                 name: str = "") -> None:
        self.value = value
        self.grad: np.ndarray | None = None
        self.requires_grad = requires_grad
        self.parents = parents
        self.name = name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    def item(self) -> float:
        """The value of a one-element node as a Python float (check `math.isfinite` on a loss)."""
        return float(self.value)

    def backward(self) -> None:
        """Fill `.grad` of every node this one depends on (dynamic mode: order found anew)."""
        backward(topological_order(self))

    def __repr__(self) -> str:
        label = f" {self.name!r}" if self.name else ""
        return f"{type(self).__name__}{label}(shape={self.shape}, dtype={self.dtype})"

    if TYPE_CHECKING:  # attached by engine/ops/__init__.py, beside the ops they build
        def __add__(self, other: Operand) -> Operator: ...
        def __radd__(self, other: Operand) -> Operator: ...
        def __sub__(self, other: Operand) -> Operator: ...
        def __rsub__(self, other: Operand) -> Operator: ...
        def __mul__(self, other: Operand) -> Operator: ...
        def __rmul__(self, other: Operand) -> Operator: ...
        def __truediv__(self, other: Operand) -> Operator: ...
        def __rtruediv__(self, other: Operand) -> Operator: ...
        def __pow__(self, other: Operand) -> Operator: ...
        def __rpow__(self, other: Operand) -> Operator: ...
        def __matmul__(self, other: Operand) -> Operator: ...
        def __rmatmul__(self, other: Operand) -> Operator: ...
        def __neg__(self) -> Operator: ...
        def sum(self, axis: int | tuple[int, ...] | None = None,
                keepdims: bool = False) -> Operator: ...
        def mean(self, axis: int | tuple[int, ...] | None = None,
                 keepdims: bool = False) -> Operator: ...
        def reshape(self, *shape: int | tuple[int, ...]) -> Operator: ...
        def __getitem__(self, key: int | slice | tuple[int | slice, ...]) -> Operator: ...
        @property
        def T(self) -> Operator: ...


Operand = Node | np.ndarray | float  # what an op accepts: raw data becomes a Constant


class Constant(Node):
    """Data that flows in and receives no gradient: inputs, targets, fixed numbers."""

    __slots__ = ()

    def __init__(self, value: np.ndarray | float, name: str = "",
                 dtype: np.dtype | type | None = None) -> None:
        array = np.asarray(value, dtype=dtype)
        if (dtype is None and array.dtype == np.float64
                and not isinstance(value, (np.ndarray, np.generic))):
            array = array.astype(DEFAULT_DTYPE)  # Python floats and lists: float32, as in Variable
        super().__init__(array, requires_grad=False, name=name)

    def feed(self, value: np.ndarray) -> None:
        """Replace the data (static mode); shape and dtype must be those the graph was built for."""
        if value.shape != self.value.shape or value.dtype != self.value.dtype:
            raise ValueError(
                f"placeholder {self.name or '(unnamed)'}: expected shape {self.value.shape} "
                f"and dtype {self.value.dtype}, got shape {value.shape} and dtype {value.dtype}")
        self.value = value


def placeholder(shape: Sequence[int], dtype: np.dtype | type = DEFAULT_DTYPE,
                name: str = "") -> Constant:
    """A constant of fixed shape and dtype to be fed later: the input slot of a static graph."""
    return Constant(np.zeros(shape, dtype=dtype), name=name)


class Variable(Node):
    """A trainable array (a parameter). Its `.grad` is filled by every backward sweep."""

    __slots__ = ()

    def __init__(self, value: np.ndarray, name: str = "",
                 dtype: np.dtype | type | None = None) -> None:
        value = np.array(value, dtype=dtype if dtype is not None else _float_dtype(value))
        super().__init__(value, requires_grad=True, name=name)


def _float_dtype(value: object) -> np.dtype:
    """float32 unless the caller handed us float64 on purpose."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        return np.dtype(np.float64)
    return np.dtype(DEFAULT_DTYPE)


class Operator(Node):
    """The result of an op applied to other nodes; computed when built."""

    __slots__ = ("op", "edge_grads")

    def __init__(self, op: Op, parents: tuple[Node, ...]) -> None:
        try:
            value = op.forward(*(p.value for p in parents), out=None)
        except ValueError as error:
            shapes = " and ".join(str(p.shape) for p in parents)
            raise ShapeError(f"{op.name}: cannot apply to shapes {shapes}: {error}") from None
        super().__init__(np.asarray(value), any(p.requires_grad for p in parents), parents)
        self.op = op
        # Gradient arrays of the edges whose parent already had a gradient from another consumer.
        self.edge_grads: list[np.ndarray | None] = [None] * len(parents)

    def recompute(self) -> None:
        """Run the op again on the parents' current values, reusing this node's output array."""
        self.value = self.op.forward(*(p.value for p in self.parents), out=self.value)

    def __repr__(self) -> str:
        return f"Operator({self.op.name}, shape={self.shape}, dtype={self.dtype})"


def topological_order(output: Node) -> list[Node]:
    """Every node `output` depends on, parents before children, `output` last.

    Iterative depth-first search: deep graphs (long unrolled sequences) hit no recursion limit.
    """
    order: list[Node] = []
    visited: set[int] = set()
    stack: list[tuple[Node, bool]] = [(output, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        stack.extend((p, False) for p in reversed(node.parents) if id(p) not in visited)
    return order


def backward(order: list[Node]) -> None:
    """The reverse sweep: seed d(out)/d(out) = 1, then send each adjoint back to the parents.

    A node used several times receives the sum of its consumers' contributions: the first
    consumer writes into the node's gradient array, later ones into an array of their own
    edge, which is then added; or, for an op that can add its contribution in place
    (`Op.accumulate`: a slice's, which touches only its part), straight into the gradient.
    """
    output = order[-1]
    output.grad = _array_like(output.grad, output.value)
    output.grad.fill(1)
    written = {id(output)}
    for node in reversed(order):
        if not isinstance(node, Operator) or not node.requires_grad:
            continue
        # Every consumer of a node comes later in `order`, so its gradient is complete by now.
        assert node.grad is not None
        inputs = [p.value for p in node.parents]
        if node.op.accumulates and all(id(p) in written for p in node.parents if p.requires_grad):
            node.op.accumulate(node.grad, node.value, *inputs,
                               *(p.grad if p.requires_grad else None for p in node.parents))
            continue
        targets: list[np.ndarray | None] = []
        late_edges: list[int] = []
        for i, parent in enumerate(node.parents):
            if not parent.requires_grad:
                targets.append(None)
            elif id(parent) in written:
                node.edge_grads[i] = _array_like(node.edge_grads[i], parent.value)
                targets.append(node.edge_grads[i])
                late_edges.append(i)
            else:
                parent.grad = _array_like(parent.grad, parent.value)
                targets.append(parent.grad)
                written.add(id(parent))
        node.op.backward(node.grad, node.value, *inputs, *targets)
        for i in late_edges:
            grad, edge = node.parents[i].grad, node.edge_grads[i]
            assert grad is not None and edge is not None  # both written above
            np.add(grad, edge, out=grad)


def _array_like(buffer: np.ndarray | None, value: np.ndarray) -> np.ndarray:
    """`buffer` if it fits `value` (static mode reuses it), else a new contiguous array."""
    if buffer is not None and buffer.shape == value.shape and buffer.dtype == value.dtype:
        return buffer
    return np.empty(value.shape, dtype=value.dtype)


class Graph:
    """A graph built once around placeholders and re-fed every batch (static mode)."""

    def __init__(self, output: Node) -> None:
        self.output = output
        self.order = topological_order(output)
        self.operators = [n for n in self.order if isinstance(n, Operator)]

    def forward(self) -> np.ndarray:
        """Recompute every operator from the placeholders' current values; return the output."""
        for node in self.operators:
            node.recompute()
        return self.output.value

    def backward(self) -> None:
        """Fill `.grad` of every variable the output depends on."""
        backward(self.order)

    def variables(self) -> list[Variable]:
        return [n for n in self.order if isinstance(n, Variable)]

    def __len__(self) -> int:
        return len(self.order)

    def __repr__(self) -> str:
        return (f"Graph({len(self.order)} nodes, {len(self.operators)} operators, "
                f"output {self.output!r})")


def as_node(x: Operand, like: Node | None = None) -> Node:
    """Wrap raw data as a Constant; a Python number (or numpy integer) takes the dtype of the
    node it meets."""
    if isinstance(x, Node):
        return x
    if isinstance(x, (int, float, np.integer)) and like is not None:
        return Constant(x, dtype=like.dtype)
    return Constant(x, dtype=None if isinstance(x, np.ndarray) else DEFAULT_DTYPE)


def apply(op: Op, *inputs: Operand) -> Operator:
    """Build the operator node `op(inputs)`; floating inputs must share one dtype (the engine
    never upcasts silently)."""
    like = next((x for x in inputs if isinstance(x, Node)), None)
    nodes = tuple(as_node(x, like) for x in inputs)
    floats = {n.dtype for n in nodes if n.dtype.kind == "f"}
    if len(floats) > 1:
        raise TypeError(f"{op.name}: inputs mix dtypes {sorted(str(d) for d in floats)}; "
                        "convert them to one dtype first (the engine never upcasts silently)")
    return Operator(op, nodes)
