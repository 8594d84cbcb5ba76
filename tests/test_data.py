"""Tests of harness.contract.data: the embedded digits, circles, k-fold, the IDX reader and the
download."""
from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from harness.contract.data import (
    DATASETS,
    FASHION_MNIST_DIR,
    Dataset,
    DatasetError,
    kfold_splits,
    load_dataset,
    mnist10k,
)
from harness.contract.data.circles import RADIUS_SQUARED
from harness.contract.data.download import download_mnist
from harness.contract.data.idx import IDX_FILES, read_idx, read_idx_pair


def idx_bytes(array: np.ndarray, type_code: int = 0x08) -> bytes:
    """An IDX file holding `array` (uint8 unless another type code is forced)."""
    header = struct.pack(f">BBBB{array.ndim}I", 0, 0, type_code, array.ndim, *array.shape)
    return header + array.tobytes()


def write_idx(path: Path, array: np.ndarray) -> Path:
    data = idx_bytes(array)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def tiny_idx_dir(directory: Path, n_train: int = 30, n_test: int = 12,
                 gz: bool = True) -> dict[str, np.ndarray]:
    """Write the four standard files with random content; return the arrays by file stem."""
    rng = np.random.default_rng(1)
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for stem, n in zip(IDX_FILES, (n_train, n_train, n_test, n_test), strict=True):
        shape = (n, 28, 28) if "images" in stem else (n,)
        arrays[stem] = rng.integers(0, 256 if "images" in stem else 10, shape, dtype=np.uint8)
        write_idx(directory / (stem + (".gz" if gz else "")), arrays[stem])
    return arrays


# --- mnist-10k --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mnist():
    return load_dataset("mnist-10k")


def test_mnist10k_shapes_types_and_range(mnist):
    assert isinstance(mnist, Dataset) and mnist.name == "mnist-10k" and mnist.n_classes == 10
    assert mnist.x_train.shape == (8000, 28, 28) and mnist.x_test.shape == (2000, 28, 28)
    assert mnist.y_train.shape == (8000,) and mnist.y_test.shape == (2000,)
    for x, y in ((mnist.x_train, mnist.y_train), (mnist.x_test, mnist.y_test)):
        assert x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1 and x.max() == 1
        assert y.dtype == np.int64 and set(np.unique(y)) == set(range(10))
    assert mnist.checksum == mnist10k.CHECKSUM and mnist.source == "embedded"


def test_mnist10k_split_is_fixed_stratified_and_shuffled(mnist):
    with np.load(mnist10k.PATH) as npz:
        train, test, labels = npz["train_idx"], npz["test_idx"], npz["labels"]
    assert len(np.intersect1d(train, test)) == 0 and len(np.union1d(train, test)) == 10_000
    counts, test_counts = np.bincount(labels), np.bincount(mnist.y_test)
    assert test_counts.sum() == 2000
    assert np.all(np.abs(test_counts - counts / 5) < 1)  # proportional
    assert np.array_equal(np.bincount(mnist.y_train) + test_counts, counts)
    assert np.count_nonzero(np.diff(mnist.y_train)) > 5000  # shuffled: not grouped by class
    assert np.array_equal(mnist.x_test, load_dataset("mnist-10k").x_test)


def test_mnist10k_float64_holds_the_same_pixels(mnist):
    d64 = load_dataset("mnist-10k", dtype=np.float64)
    assert d64.x_train.dtype == np.float64 and d64.checksum == mnist.checksum
    assert np.array_equal(d64.x_train.astype(np.float32), mnist.x_train)
    np.testing.assert_array_equal(d64.x_train * 255, np.round(d64.x_train * 255))  # exact k/255


def test_mnist10k_loads_fast():
    start = time.perf_counter()
    load_dataset("mnist-10k")
    assert time.perf_counter() - start < 1.0


def test_mnist10k_corrupt_or_missing_file_is_reported(tmp_path):
    with np.load(mnist10k.PATH) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["labels"][0] ^= 1
    np.savez_compressed(tmp_path / "bad.npz", **arrays)
    with pytest.raises(DatasetError,
                       match=r"bad\.npz is corrupt: its checksum .*build_mnist10k\.py"):
        mnist10k.load(path=tmp_path / "bad.npz")
    (tmp_path / "junk.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(DatasetError, match=r"junk\.npz is corrupt"):
        mnist10k.load(path=tmp_path / "junk.npz")
    with pytest.raises(DatasetError, match=r"gone\.npz is missing.*git checkout"):
        mnist10k.load(path=tmp_path / "gone.npz")


# --- circles and k-fold -----------------------------------------------------------------------

def test_circles_shapes_rule_and_balance():
    d = load_dataset("circles")
    assert d.x_train.shape == (8000, 2) and d.x_test.shape == (2000, 2) and d.n_classes == 2
    assert d.x_train.dtype == np.float32 and d.y_train.dtype == np.int64
    for x, y in ((d.x_train, d.y_train), (d.x_test, d.y_test)):
        assert 0 <= x.min() and x.max() < 1
        r2 = ((x.astype(np.float64) - 0.5) ** 2).sum(axis=1)
        assert np.array_equal(y, (r2 > RADIUS_SQUARED).astype(np.int64))  # every point
        assert abs(y.mean() - 0.5) < 0.05  # the circle has area 1/2: std of the mean <= 0.011
    assert abs(np.concatenate([d.y_train, d.y_test]).mean() - 0.5) < 0.02


def test_circles_are_reproducible_across_calls_and_dtypes():
    a, b = load_dataset("circles"), load_dataset("circles", dtype=np.float64)
    assert a.checksum == b.checksum and b.x_train.dtype == np.float64
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)
    assert np.array_equal(a.x_test, load_dataset("circles").x_test)


@pytest.mark.parametrize("n,k", [(10_000, 5), (11, 3), (2, 2)])
def test_kfold_splits_are_disjoint_and_cover(n, k):
    splits = kfold_splits(n, k, seed=0)
    assert len(splits) == k
    tests = [test for _, test in splits]
    assert np.array_equal(np.sort(np.concatenate(tests)), np.arange(n))  # disjoint and covering
    assert max(map(len, tests)) - min(map(len, tests)) <= 1
    for train, test in splits:
        assert np.array_equal(np.union1d(train, test), np.arange(n))
        assert not np.intersect1d(train, test).size


def test_kfold_splits_depend_on_seed_only():
    same = zip(kfold_splits(100, 5, seed=3), kfold_splits(100, 5, seed=3), strict=True)
    assert all(np.array_equal(a[1], b[1]) for a, b in same)
    assert not np.array_equal(kfold_splits(100, 5, seed=3)[0][1],
                              kfold_splits(100, 5, seed=4)[0][1])
    with pytest.raises(ValueError, match="k=1"):
        kfold_splits(10, 1, seed=0)


# --- IDX reader -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["images-idx3-ubyte", "images-idx3-ubyte.gz"])
def test_read_idx_round_trips_raw_and_gzip(tmp_path, name):
    images = np.random.default_rng(0).integers(0, 256, (5, 28, 28), dtype=np.uint8)
    hasher = hashlib.sha256()
    out = read_idx(write_idx(tmp_path / name, images), hasher)
    assert out.dtype == np.uint8 and np.array_equal(out, images)
    assert hasher.hexdigest() == hashlib.sha256(idx_bytes(images)).hexdigest()  # decompressed bytes


GOOD = idx_bytes(np.zeros((3, 28, 28), np.uint8))


@pytest.mark.parametrize("name,content,problem", [
    ("magic", b"\x08\x03" + GOOD[2:], "bad magic number 0803"),
    ("type", idx_bytes(np.zeros(3, np.uint8), type_code=0x0D), r"type code 0x0d \(float32\)"),
    ("truncated", GOOD[:-100],
     "truncated: header says 3x28x28 = 2352 bytes of data, file has 2252"),
    ("trailing", GOOD + b"\0\0",
     "trailing bytes: header says 3x28x28 = 2352 bytes of data, file has 2354"),
    ("short", GOOD[:10], "header is cut short"),
    ("corrupt.gz", gzip.compress(GOOD, mtime=0)[:-20], "corrupt gzip file"),
    ("notgzip.gz", GOOD, "corrupt gzip file"),
    ("missing", None, "cannot read"),
])
def test_read_idx_reports_bad_files(tmp_path, name, content, problem):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DatasetError, match=problem) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_read_idx_pair_checks_counts_shape_and_labels(tmp_path):
    images = write_idx(tmp_path / "im", np.zeros((4, 28, 28), np.uint8))
    with pytest.raises(DatasetError, match="4 images but .*lab3 has 3 labels"):
        read_idx_pair(images, write_idx(tmp_path / "lab3", np.zeros(3, np.uint8)))
    with pytest.raises(DatasetError, match="lab10: label 10 out of range 0..9"):
        read_idx_pair(images, write_idx(tmp_path / "lab10", np.array([0, 1, 10, 2], np.uint8)))
    small = write_idx(tmp_path / "small", np.zeros((4, 14, 14), np.uint8))
    with pytest.raises(DatasetError, match=r"small: images are \(14, 14\), expected 28x28"):
        read_idx_pair(small, write_idx(tmp_path / "lab", np.zeros(4, np.uint8)))
    x, y = read_idx_pair(images, tmp_path / "lab")
    assert x.shape == (4, 28, 28) and y.dtype == np.int64


# --- IDX datasets -----------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_from_data_dir(tmp_path, gz):
    arrays = tiny_idx_dir(tmp_path, gz=gz)
    d = load_dataset("fashion-mnist", data_dir=tmp_path)
    assert d.x_train.shape == (30, 28, 28) and d.x_test.shape == (12, 28, 28) and d.n_classes == 10
    assert d.x_train.dtype == np.float32 and 0 <= d.x_train.min() and d.x_train.max() <= 1
    assert np.array_equal(np.round(d.x_train * 255).astype(np.uint8), arrays[IDX_FILES[0]])
    assert np.array_equal(d.y_test, arrays[IDX_FILES[3]]) and d.y_test.dtype == np.int64
    expected = hashlib.sha256(b"".join(idx_bytes(arrays[stem]) for stem in IDX_FILES)).hexdigest()
    assert d.checksum == expected and d.source == str(tmp_path)  # the same for raw and .gz files
    as_f64 = load_dataset("fashion-mnist", data_dir=tmp_path, dtype=np.float64)
    assert as_f64.x_test.dtype == np.float64


def test_idx_dataset_in_named_subfolder_of_data_dir(tmp_path):
    tiny_idx_dir(tmp_path / "mnist")
    assert load_dataset("mnist", data_dir=tmp_path).source == str(tmp_path / "mnist")


@pytest.mark.skipif(not FASHION_MNIST_DIR.is_dir(), reason="dataset-fashion-mnist not installed")
def test_fashion_mnist_system_copy():
    d = load_dataset("fashion-mnist")
    assert d.x_train.shape == (60000, 28, 28) and d.x_test.shape == (10000, 28, 28)
    assert np.array_equal(np.bincount(d.y_test), np.full(10, 1000))


def test_missing_idx_datasets_say_how_to_get_them(tmp_path):
    with pytest.raises(DatasetError,
                       match="apt-get install dataset-fashion-mnist.*--data-dir") as info:
        load_dataset("fashion-mnist", data_dir=tmp_path)
    assert f"{tmp_path}: missing train-images-idx3-ubyte" in str(info.value)
    write_idx(tmp_path / "train-images-idx3-ubyte.gz", np.zeros((1, 28, 28), np.uint8))
    with pytest.raises(DatasetError, match=r"python -m harness\.contract\.data\.download") as info:
        load_dataset("mnist", data_dir=tmp_path)
    assert "missing train-labels-idx1-ubyte, t10k-images" in str(info.value)
    assert f"{tmp_path / 'mnist'}: no such folder" in str(info.value)


def test_unknown_dataset_lists_valid_names():
    with pytest.raises(DatasetError, match="unknown dataset 'cifar'") as info:
        load_dataset("cifar")
    assert all(name in str(info.value) for name in DATASETS)
    assert set(DATASETS) == {"mnist-10k", "mnist", "fashion-mnist", "circles"}


def test_integer_dtype_is_refused():
    with pytest.raises(ValueError, match="floating"):
        load_dataset("circles", dtype=np.int32)


# --- download ---------------------------------------------------------------------------------

@pytest.fixture
def server(tmp_path):
    """A local HTTP server of tiny gzip IDX files: (base URL, their SHA-256 by name)."""
    served = tmp_path / "served"
    served.mkdir()
    tiny_idx_dir(served)
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in served.iterdir()}
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", digests
    httpd.shutdown()
    httpd.server_close()


def test_download_verifies_and_loads(tmp_path, server):
    url, digests = server
    dest = download_mnist(tmp_path / "mnist", base_url=url, digests=digests)
    assert sorted(p.name for p in dest.iterdir()) == sorted(digests)  # no temporary files left
    assert load_dataset("mnist", data_dir=dest).x_train.shape == (30, 28, 28)
    assert download_mnist(dest, base_url="http://127.0.0.1:9/", digests=digests) == dest  # all kept


def test_download_digest_mismatch_raises_and_leaves_no_file(tmp_path, server):
    url, digests = server
    wrong = dict(digests, **{"t10k-images-idx3-ubyte.gz": "0" * 64})
    expected = r"t10k-images-idx3-ubyte\.gz: SHA-256 is [0-9a-f]{64}, expected 0{64}"
    with pytest.raises(DatasetError, match=expected):
        download_mnist(tmp_path / "mnist", base_url=url, digests=wrong)
    assert not any("t10k-images" in p.name for p in (tmp_path / "mnist").iterdir())


def test_download_failure_is_a_dataset_error(tmp_path, server):
    url, digests = server
    with pytest.raises(DatasetError, match="nothere.gz: download failed"):
        download_mnist(tmp_path / "mnist", base_url=url, digests={"nothere.gz": "0" * 64})
    assert not any((tmp_path / "mnist").iterdir())
