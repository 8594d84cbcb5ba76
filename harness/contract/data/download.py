"""Optional download of the four standard MNIST files, each verified against its SHA-256.

Run `python -m harness.contract.data.download [DIR]` to fill DIR (default: MNIST_DIR, where
`load_dataset("mnist")` looks when it is given no data directory).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from harness.contract.data import MNIST_DIR
from harness.errors import DatasetError

# The mirror TensorFlow and TFDS use; it serves the original files of yann.lecun.com.
BASE_URL = "https://storage.googleapis.com/cvdf-datasets/mnist/"
# SHA-256 of the original gzip files (9,912,422 / 28,881 / 1,648,877 / 4,542 bytes), as published
# in the TFDS and torchvision checksum tables.
MNIST_SHA256 = {
    "train-images-idx3-ubyte.gz":
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    "train-labels-idx1-ubyte.gz":
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    "t10k-images-idx3-ubyte.gz":
        "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz":
        "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_mnist(dest_dir: str | Path = MNIST_DIR, base_url: str = BASE_URL,
                   digests: Mapping[str, str] = MNIST_SHA256, timeout: float = 60) -> Path:
    """Download each file of `digests` from `base_url` into `dest_dir` and return `dest_dir`.

    A file already present with the right digest is kept. Each download goes to a temporary
    file that is renamed into place only once its digest matches, so a failed or interrupted
    download never leaves a file that looks valid; a mismatch raises DatasetError.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for name, expected in digests.items():
        target = dest / name
        if target.is_file() and _sha256(target) == expected:
            continue
        url = base_url.rstrip("/") + "/" + name
        part = dest / f"{name}.part"
        digest = hashlib.sha256()
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, part.open("wb") as f:
                for block in iter(lambda: response.read(1 << 20), b""):
                    digest.update(block)
                    f.write(block)
            if digest.hexdigest() != expected:
                raise DatasetError(f"{url}: SHA-256 is {digest.hexdigest()}, expected {expected}; "
                                   "the file was deleted: try again later or another mirror "
                                   "(base_url)")
            os.replace(part, target)
        except OSError as e:  # urllib's URLError and HTTPError are OSErrors
            raise DatasetError(f"{url}: download failed ({e}); check the network, or place the "
                               f"four MNIST files in {dest} yourself") from None
        finally:
            part.unlink(missing_ok=True)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dest", nargs="?", type=Path, default=MNIST_DIR,
                        help="folder (default: %(default)s)")
    parser.add_argument("--base-url", default=BASE_URL, help="mirror (default: %(default)s)")
    args = parser.parse_args()
    try:
        print(download_mnist(args.dest, args.base_url))
    except DatasetError as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    main()
