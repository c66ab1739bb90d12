"""Synthetic stand-ins, in the files' own formats, for data sets the fresh2 public scripts read and
this machine does not have (no downloads): each learnable, seeded, small.  Used by run.py's
``"kind": "standin"`` data entries (``"name"`` picks the function, ``dest`` is where it writes).

- ``ett``: an hourly multivariate series as Informer's ``custom`` CSV (``date``, six loads, ``OT``):
  daily and weekly cycles, a slow drift, shared noise, ``OT`` a lagged mix of the loads.
- ``movielens``: MovieLens-1M's ``ratings.dat`` (``user::item::rating::time``): ratings 1-5 from a
  rank-4 user x item taste model plus noise, each user rating a random 8% of the items.
- ``modelnet10``: ModelNet10's resampled layout (``modelnet10_shape_names.txt``, ``_train.txt``,
  ``_test.txt``, ``CLASS/CLASS_NNNN.txt`` with ``x,y,z,nx,ny,nz`` lines): ten solid shapes (sphere,
  cube, cylinder, cone, torus, ...), each sample randomly scaled, rotated about z and jittered.
- ``mnist_gz60k`` (fresh4): MNIST's four gzipped IDX files at full size (60,000 training and 10,000
  test digits, as loaders that reshape to those counts expect), made from the shared t10k split: its
  first 8,000 digits repeated to fill the training file, its last 2,000 repeated to fill the test file.
- ``names`` (fresh5): makemore's ``names.txt`` (one lower-case name a line, a-z only) for the
  nn-zero-to-hero notebooks, whose repository does not ship it: the distinct words of tiny
  Shakespeare's first 30,000 lines, lower-cased, letters only, 3 to 12 letters, in a seeded order.
"""

from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path

import numpy as np


def ett(dest: Path, rows: int = 2400, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    common = np.cumsum(rng.normal(0, 0.05, rows))
    cols = []
    for k in range(6):
        day = np.sin(2 * np.pi * (t / 24 + k / 6)) * (1 + 0.3 * k)
        week = 0.5 * np.sin(2 * np.pi * t / (24 * 7) + k)
        cols.append(5 + day + week + common + rng.normal(0, 0.2, rows))
    loads = np.stack(cols, 1)
    ot = 20 + 0.8 * np.roll(loads[:, :3].mean(1), 3) - 0.3 * loads[:, 3:].mean(1) + rng.normal(0, 0.1, rows)
    dates = np.datetime64("2016-07-01T00:00") + t.astype("timedelta64[h]")
    names = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL"]
    lines = ["date," + ",".join(names) + ",OT"]
    for i in range(rows):
        stamp = str(dates[i]).replace("T", " ") + ":00"
        lines.append(stamp + "," + ",".join(f"{v:.3f}" for v in loads[i]) + f",{ot[i]:.3f}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")


def movielens(dest: Path, users: int = 500, items: int = 300, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    u, v = rng.normal(0, 1, (users, 4)), rng.normal(0, 1, (items, 4))
    bias = rng.normal(0, 0.5, items)
    lines = []
    for a in range(users):
        seen = np.flatnonzero(rng.random(items) < 0.08)
        score = u[a] @ v[seen].T / 2 + bias[seen] + rng.normal(0, 0.5, len(seen))
        stars = np.clip(np.round(3 + score), 1, 5).astype(int)
        lines += [f"{a + 1}::{b + 1}::{s}::{978300000 + 60 * k}" for k, (b, s) in enumerate(zip(seen, stars))]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")


def _shape(kind: int, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n surface points and their unit normals of shape ``kind`` (0-9)."""
    a, b = rng.random(n) * 2 * np.pi, rng.random(n)
    if kind in (0, 6):  # sphere, flattened ellipsoid
        z = 2 * b - 1
        r = np.sqrt(1 - z ** 2)
        p = np.stack([r * np.cos(a), r * np.sin(a), z * (0.5 if kind == 6 else 1)], 1)
        nrm = p / np.array([1, 1, 0.25 if kind == 6 else 1])
    elif kind in (1, 7):  # cube, flat box
        face = rng.integers(0, 6, n)
        p = rng.uniform(-1, 1, (n, 3))
        axis, sign = face % 3, np.where(face < 3, 1.0, -1.0)
        p[np.arange(n), axis] = sign
        nrm = np.zeros((n, 3))
        nrm[np.arange(n), axis] = sign
        if kind == 7:
            p[:, 2] *= 0.3
    elif kind in (2, 8):  # cylinder, thin tube
        r = 1.0 if kind == 2 else 0.3
        p = np.stack([r * np.cos(a), r * np.sin(a), 2 * b - 1], 1)
        nrm = np.stack([np.cos(a), np.sin(a), np.zeros(n)], 1)
    elif kind == 3:  # cone
        r = 1 - b
        p = np.stack([r * np.cos(a), r * np.sin(a), 2 * b - 1], 1)
        nrm = np.stack([np.cos(a), np.sin(a), np.full(n, 0.5)], 1)
    elif kind == 4:  # torus
        c = rng.random(n) * 2 * np.pi
        p = np.stack([(1 + 0.3 * np.cos(c)) * np.cos(a), (1 + 0.3 * np.cos(c)) * np.sin(a), 0.3 * np.sin(c)], 1)
        nrm = np.stack([np.cos(c) * np.cos(a), np.cos(c) * np.sin(a), np.sin(c)], 1)
    elif kind == 5:  # square plate
        p = np.stack([rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), np.zeros(n)], 1)
        nrm = np.tile([0.0, 0.0, 1.0], (n, 1))
    else:  # two crossed bars
        p = rng.uniform(-1, 1, (n, 3)) * np.array([1, 0.15, 0.15])
        half = rng.random(n) < 0.5
        p[half] = p[half][:, [1, 0, 2]]
        nrm = np.tile([0.0, 0.0, 1.0], (n, 1))
    nrm = nrm / np.linalg.norm(nrm, axis=1, keepdims=True)
    return p, nrm


def modelnet10(dest: Path, train: int = 24, test: int = 8, points: int = 1024, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    names = ["bathtub", "bed", "chair", "desk", "dresser", "monitor", "night_stand", "sofa", "table", "toilet"]
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "modelnet10_shape_names.txt").write_text("\n".join(names) + "\n")
    split: dict[str, list[str]] = {"train": [], "test": []}
    for kind, name in enumerate(names):
        (dest / name).mkdir(exist_ok=True)
        for i in range(train + test):
            p, nrm = _shape(kind, points, rng)
            theta = rng.random() * 2 * np.pi
            rot = np.array([[np.cos(theta), -np.sin(theta), 0], [np.sin(theta), np.cos(theta), 0], [0, 0, 1]])
            p = (p * rng.uniform(0.7, 1.3, 3)) @ rot.T + rng.normal(0, 0.01, (points, 3))
            nrm = nrm @ rot.T
            shape_id = f"{name}_{i + 1:04d}"
            rows = np.concatenate([p, nrm], 1)
            (dest / name / f"{shape_id}.txt").write_text("\n".join(",".join(f"{v:.6f}" for v in r) for r in rows) + "\n")
            split["train" if i < train else "test"].append(shape_id)
    for part, ids in split.items():
        (dest / f"modelnet10_{part}.txt").write_text("\n".join(ids) + "\n")


def mnist_gz60k(dest: Path, train: int = 8000) -> None:
    src = Path(__file__).resolve().parents[3] / "shared" / "data" / "mnist-t10k"
    images = np.frombuffer(gzip.open(src / "t10k-images-idx3-ubyte.gz").read()[16:], np.uint8).reshape(10000, 784)
    labels = np.frombuffer(gzip.open(src / "t10k-labels-idx1-ubyte.gz").read()[8:], np.uint8)
    dest.mkdir(parents=True, exist_ok=True)
    for part, n, sl in (("train", 60000, slice(0, train)), ("t10k", 10000, slice(train, 10000))):
        idx = np.resize(np.arange(10000)[sl], n)
        with gzip.open(dest / f"{part}-images-idx3-ubyte.gz", "wb", compresslevel=1) as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + images[idx].tobytes())
        with gzip.open(dest / f"{part}-labels-idx1-ubyte.gz", "wb", compresslevel=1) as f:
            f.write(struct.pack(">II", 2049, n) + labels[idx].tobytes())


def names(dest: Path, seed: int = 0) -> None:
    import re
    src = Path(__file__).resolve().parents[3] / "shared" / "data" / "tinyshakespeare" / "input.txt"
    lines = src.read_text(encoding="utf-8").splitlines()[:30000]
    words = sorted({w.lower() for line in lines for w in re.findall(r"[A-Za-z]+", line) if 3 <= len(w) <= 12})
    order = np.random.default_rng(seed).permutation(len(words))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(words[i] for i in order) + "\n")


if __name__ == "__main__":
    globals()[sys.argv[1]](Path(sys.argv[2]))
