"""The engine's graph drawn (engine/dot.py, adh graph)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import engine as ad
from engine.dot import to_dot
from harness.cli import main


def test_dot_has_a_node_per_graph_node_and_shapes_on_edges() -> None:
    x = ad.placeholder((4, 3), name="x")
    w = ad.Variable(np.ones((3, 2), np.float32))
    graph = ad.Graph(ad.sum(ad.relu(x @ w)))
    text = to_dot(graph, "tiny", {id(w): "layer.weight"})
    assert len(re.findall(r"^  n\d+ \[label=", text, re.M)) == len(graph.order) == 5
    assert 'label="x\\n(4, 3)", shape=ellipse' in text
    assert 'label="layer.weight\\n(3, 2)", shape=box, style="filled"' in text
    assert re.search(r'n0 -> n2 \[label="\(4, 3\)"\]', text)  # data into the matmul
    assert 'label="Sum (output)"' in text and 'label="scalar"' not in text.split("Sum")[0]


def test_adh_graph_draws_the_cnn(tmp_path: Path, capsys) -> None:
    if shutil.which("dot") is None:
        message = "needs Graphviz (apt-get install graphviz; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    assert main(["graph", "cnn", "--out", str(tmp_path), "--batch", "8"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "cnn-graph.dot"),
                                               str(tmp_path / "cnn-graph.svg")]
    svg = (tmp_path / "cnn-graph.svg").read_text()
    assert svg.count(">Conv2d</text>") == 2 and svg.count(">MaxPool2d</text>") == 2
    assert "(6, 24, 24, 8)" in svg and "SoftmaxCrossEntropy (output)" in svg  # batch-last


def test_adh_graph_without_graphviz_writes_the_dot_and_says_what_to_install(
        tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["graph", "mlp", "--out", str(tmp_path)]) == 2
    dot = (tmp_path / "mlp-graph.dot").read_text()
    # titled for what it shows: the forward graph, which the backward walks in reverse
    assert 'label="mlp: the forward graph of a training step, batch 100 (engine-static; ' in dot
    assert "apt-get install graphviz" in capsys.readouterr().err
