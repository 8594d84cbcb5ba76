"""Reader of IDX files, the format of MNIST and Fashion-MNIST (http://yann.lecun.com/exdb/mnist/).

An IDX file is a 4-byte magic number (0, 0, type code, number of dimensions), one big-endian
uint32 per dimension, then the values in C order. Files ending in .gz are decompressed on the fly.
"""
from __future__ import annotations

import gzip
import hashlib
import math
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import DatasetError

# Type codes of the IDX format. MNIST-like data is all uint8; the others are named in errors only.
_TYPE_NAMES = {0x08: "uint8", 0x09: "int8", 0x0B: "int16", 0x0C: "int32",
               0x0D: "float32", 0x0E: "float64"}
IMAGE_SHAPE = (28, 28)
# The standard file names, in the order the checksum of a dataset hashes them.
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
N_CLASSES = 10


def read_idx(path: str | Path, hasher: Any = None) -> np.ndarray:
    """Read one uint8 IDX file (raw, or gzip when the name ends in .gz) into an array.

    `hasher` (a hashlib object), if given, is updated with the decompressed bytes, so that a
    dataset's checksum costs no second read. Every problem raises DatasetError naming the file.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DatasetError(f"{path}: cannot read: {e.strerror or e}") from None
    if path.suffix == ".gz":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
            raise DatasetError(f"{path}: corrupt gzip file ({e}); download it again") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise DatasetError(f"{path}: bad magic number {data[:4].hex()}: not an IDX file")
    type_code, ndim = data[2], data[3]
    if type_code != 0x08:
        kind = _TYPE_NAMES.get(type_code, "unknown")
        raise DatasetError(f"{path}: unsupported IDX type code 0x{type_code:02x} ({kind}); "
                           "only uint8 (0x08) is read")
    header = 4 + 4 * ndim
    if ndim == 0 or len(data) < header:
        raise DatasetError(f"{path}: header is cut short: {ndim} dimensions need {header} bytes, "
                           f"file has {len(data)}")
    dims = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
    expected, actual = math.prod(dims), len(data) - header
    if actual != expected:
        problem = "truncated" if actual < expected else "trailing bytes"
        shape = "x".join(map(str, dims))
        raise DatasetError(f"{path}: {problem}: header says {shape} = {expected} bytes of data, "
                           f"file has {actual}")
    if hasher is not None:
        hasher.update(data)
    return np.frombuffer(data, np.uint8, offset=header).reshape(dims)


def read_idx_pair(images_path: str | Path, labels_path: str | Path,
                  hasher: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Read matching image and label files: (N, 28, 28) uint8 images and (N,) int64 labels < 10."""
    images = read_idx(images_path, hasher)
    labels = read_idx(labels_path, hasher)
    if images.ndim != 3 or images.shape[1:] != IMAGE_SHAPE:
        raise DatasetError(f"{images_path}: images are {images.shape[1:]}, expected 28x28")
    if labels.ndim != 1:
        raise DatasetError(f"{labels_path}: labels have shape {labels.shape}, "
                           "expected one dimension")
    if len(images) != len(labels):
        raise DatasetError(f"{images_path} has {len(images)} images "
                           f"but {labels_path} has {len(labels)} labels")
    if labels.size and labels.max() >= N_CLASSES:
        raise DatasetError(f"{labels_path}: label {labels.max()} out of range 0..{N_CLASSES - 1}")
    return images, labels.astype(np.int64)


def find_idx_files(directory: Path) -> dict[str, Path | None]:
    """Map each standard IDX name to its file in `directory` (raw preferred over .gz), or None."""
    found = {}
    for stem in IDX_FILES:
        candidates = [directory / stem, directory / f"{stem}.gz"]
        found[stem] = next((p for p in candidates if p.is_file()), None)
    return found


def read_idx_dir(directory: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """Read the four standard files of `directory`: x_train, y_train, x_test, y_test (uint8 images,
    int64 labels) and the SHA-256 of their decompressed bytes in IDX_FILES order."""
    files = find_idx_files(directory)
    missing = [stem for stem, p in files.items() if p is None]
    if missing:
        raise DatasetError(f"{directory}: missing {', '.join(missing)} (raw or .gz)")
    hasher = hashlib.sha256()
    paths = [files[stem] for stem in IDX_FILES]
    x_train, y_train = read_idx_pair(paths[0], paths[1], hasher)
    x_test, y_test = read_idx_pair(paths[2], paths[3], hasher)
    return x_train, y_train, x_test, y_test, hasher.hexdigest()
