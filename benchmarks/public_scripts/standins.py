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
- ``binarized_mnist`` (fresh6): pytorch-made's ``binarized_mnist.npz`` (``train_data``, ``valid_data``:
  float32 rows of 784 zeros and ones) from the shared t10k split: its first 8,000 digits thresholded at
  half intensity as the training rows, its last 2,000 as the validation rows.
- ``omniglot_npy`` (fresh6): MAML-Pytorch's cached ``omniglot.npy`` (classes x 20 x 28 x 28 x 1 in [0, 1],
  the loader's own cache: with it present nothing is downloaded): 1,300 synthetic "characters", each a
  seeded set of three random strokes, drawn 20 times with a random shift and stroke jitter.
- ``adult`` (fresh6): UCI Adult's ``adult.data`` (no header; 15 comma-and-space separated fields: age,
  workclass, fnlwgt, education, education-num, marital-status, occupation, relationship, race, sex,
  capital-gain, capital-loss, hours-per-week, native-country, ``<=50K``/``>50K``), saved where the tabnet
  notebooks cache their download: the income label from a logistic model of education, age, hours,
  capital gain and marital status, about a quarter ``>50K`` as in Adult.
- ``carvana`` (fresh6): Pytorch-UNet's Carvana layout (``imgs/ID.jpg``, ``masks/ID_mask.gif``, the mask a
  0/255 palette image): 96 RGB scenes of 32 x 32, a noisy textured background with one to three
  coloured ellipses and a distractor square; the mask is the ellipses (two classes).
- ``rtdl_adult`` (fresh7): the Adult directory of yandex-research/tabular-dl-revisiting-models (``data/adult``:
  ``N_{train,val,test}.npy`` float32 numerical features, ``C_...npy`` string categorical features, ``y_...npy``
  int64 labels, ``info.json`` with the task type and sizes): rows drawn as ``adult``'s (six numerical and
  eight categorical fields, the same logistic income label), split 3,000 / 1,000 / 1,000.
- ``ncf_ml1m`` (fresh7): guoyang9/NCF's leave-one-out MovieLens files (``ml-1m.train.rating``: ``user\titem\t
  rating\ttime``; ``ml-1m.test.rating``; ``ml-1m.test.negative``: ``(user,item)`` then 99 items the user never
  rated, tab separated): 300 users, 500 items from a rank-4 taste model, each user's 30 best-liked items
  seen, the last one held out as the test item.
- ``unet3d_cells`` (fresh7): pytorch-3dunet's HDF5 volumes (``train/vol_N.h5``, ``val/vol_N.h5``, each a float32
  ``raw`` of 16 x 64 x 64, 64 the smallest patch side the package takes, and a ``label`` of cell ids): 24
  Voronoi cells filling the volume (ids from 1, as the boundary configurations' instance labels), the raw
  bright on the cell boundaries, dim inside, with noise.
- ``omniglot_png`` (fresh8): oscarknagg/few-shot's prepared Omniglot folders (``Omniglot/images_background`` and
  ``Omniglot/images_evaluation``, each ``ALPHABET/CHARACTER/N.png``, 28 x 28 grey, as its prepare_omniglot.py
  writes): ``omniglot_npy``'s stroke characters, 5 alphabets of 20 characters for background and 3 of 10 for
  evaluation, each drawn 20 times.
- ``spotlight_ml1m`` (fresh8): spotlight's cached MovieLens-1M file (``spotlight_data/movielens/v0.2.0/
  movielens_movielens_1M.hdf5`` under the directory given, its ``user_id``, ``item_id``, ``rating``, ``timestamp`` arrays: what
  ``get_movielens_dataset`` reads before it would download): 200 users each watching 30 to 80 of 600 items in
  time order, the items grouped into 20 genres of 30, each user moving through two genres with the next item
  usually the next one in the genre (learnable as a sequence).
- ``digits_folder`` (fresh8): an ImageFolder tree (``DIGIT/N.png``, 28 x 28 grey) of the shared t10k split's first
  2,560 digits, for vq-vae-2's ``train_vqvae.py``, which reads any image folder.
- ``gin_graphs`` (fresh11): powerful-gnns' text graph files (``dataset/NAME/NAME.txt``: the graph count, then per
  graph ``nodes label`` and per node ``tag degree neighbours...``), two sets: ``MUTAG`` (188 molecule-like graphs of
  10-28 nodes with 7 atom tags: a ring backbone with tagged side chains, labelled by whether a three-node motif of
  tags 2-3-2 is present) and ``IMDBBINARY`` (500 untagged ego-networks of 12-30 nodes: one class a few dense
  cliques, the other one sparse community; the script's ``--degree_as_tag`` makes the tags).
- ``ngcf_ratings`` (fresh11): NGCF-PyTorch's ``Data/NAME/train.txt`` and ``test.txt`` (``user item item ...`` a line,
  ids from 0): 300 users, 400 items from a rank-4 taste model, each user's 24 best-liked items of a random 40%
  seen, 80% of them for training and the rest for test.
- ``rgb_shapes`` (fresh11): an ImageFolder tree (``CLASS/N.png``, 32 x 32 RGB) of 1,024 scenes for pytorch-ddpm, which
  trains on CIFAR-10's 32 x 32 colour images: a smooth two-colour gradient background with one filled disc,
  square or triangle of a random colour, size and place (the class is the shape).
"""

from __future__ import annotations

import gzip
import os
import struct
import sys
from pathlib import Path

import numpy as np


def _shared() -> Path:
    """The shared data sets: ``PUBLIC_SCRIPTS_DATA``, which run.py (the owner of that path) sets for this process, or
    ``../shared/data`` beside the checkout when the stand-ins are made by hand."""
    env = os.environ.get("PUBLIC_SCRIPTS_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"


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
    src = _shared() / "mnist-t10k"
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
    src = _shared() / "tinyshakespeare" / "input.txt"
    lines = src.read_text(encoding="utf-8").splitlines()[:30000]
    words = sorted({w.lower() for line in lines for w in re.findall(r"[A-Za-z]+", line) if 3 <= len(w) <= 12})
    order = np.random.default_rng(seed).permutation(len(words))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(words[i] for i in order) + "\n")


def _t10k_images() -> np.ndarray:
    src = _shared() / "mnist-t10k" / "t10k-images-idx3-ubyte.gz"
    with gzip.open(src) as f:
        return np.frombuffer(f.read()[16:], np.uint8).reshape(10000, 784)


def digits_folder(dest: Path, count: int = 2560) -> None:
    from PIL import Image
    src = _shared() / "mnist-t10k" / "t10k-labels-idx1-ubyte.gz"
    with gzip.open(src) as f:
        labels = np.frombuffer(f.read()[8:], np.uint8)
    images = _t10k_images()
    for i in range(count):
        folder = dest / str(int(labels[i]))
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(images[i].reshape(28, 28)).save(folder / f"{i:05d}.png")


def binarized_mnist(dest: Path, train: int = 8000) -> None:
    bits = (_t10k_images() > 127).astype(np.float32)
    dest.parent.mkdir(parents=True, exist_ok=True)
    np.savez(dest, train_data=bits[:train], valid_data=bits[train:])


def _strokes(rng: np.random.Generator, n: int = 3) -> np.ndarray:
    return rng.uniform(6, 22, (n, 2, 2))  # n strokes, each from one point to another (row, col)


def _draw(strokes: np.ndarray, rng: np.random.Generator, size: int = 28) -> np.ndarray:
    img = np.zeros((size, size), np.float32)
    shift = rng.integers(-2, 3, 2)
    ends = strokes + rng.normal(0, 0.7, strokes.shape)
    t = np.linspace(0, 1, 30)[None, :, None]
    pts = np.clip(np.round(ends[:, None, 0] + t * (ends[:, None, 1] - ends[:, None, 0]) + shift).astype(int),
                  0, size - 1).reshape(-1, 2)
    for dr in (0, 1):  # two pixels wide
        for dc in (0, 1):
            img[np.maximum(pts[:, 0] - dr, 0), np.maximum(pts[:, 1] - dc, 0)] = 1.0
    return img


def omniglot_npy(dest: Path, classes: int = 1300, per: int = 20, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x = np.stack([np.stack([_draw(s, rng) for _ in range(per)]) for s in (_strokes(rng) for _ in range(classes))])
    dest.parent.mkdir(parents=True, exist_ok=True)
    np.save(dest, x[..., None])


def omniglot_png(dest: Path, seed: int = 0) -> None:
    from PIL import Image
    rng = np.random.default_rng(seed)
    for subset, alphabets, characters in (("background", 5, 20), ("evaluation", 3, 10)):
        for a in range(alphabets):
            for c in range(characters):
                folder = dest / "Omniglot" / f"images_{subset}" / f"alphabet{a:02d}" / f"character{c:02d}"
                folder.mkdir(parents=True, exist_ok=True)
                strokes = _strokes(rng)
                for n in range(20):
                    img = _draw(strokes, rng)
                    Image.fromarray((255 - 255 * img).astype(np.uint8)).save(folder / f"{n:02d}.png")


def spotlight_ml1m(dest: Path, users: int = 200, genres: int = 20, per: int = 30, seed: int = 0) -> None:
    import h5py
    rng = np.random.default_rng(seed)
    uid, iid, rating, stamp = [], [], [], []
    for u in range(1, users + 1):
        liked = rng.choice(genres, 2, replace=False)
        pos = {g: int(rng.integers(per)) for g in liked}
        t = int(rng.integers(10**8, 10**9))
        for _ in range(int(rng.integers(30, 81))):
            g = int(liked[int(rng.random() < 0.3)])
            pos[g] = (pos[g] + (1 if rng.random() < 0.8 else int(rng.integers(per)))) % per
            uid.append(u)
            iid.append(1 + g * per + pos[g])
            rating.append(float(rng.integers(3, 6)))
            t += int(rng.integers(60, 86400))
            stamp.append(t)
    out = dest / "spotlight_data" / "movielens" / "v0.2.0"
    out.mkdir(parents=True, exist_ok=True)
    with h5py.File(out / "movielens_movielens_1M.hdf5", "w") as f:
        f.create_dataset("user_id", data=np.array(uid, np.int32))
        f.create_dataset("item_id", data=np.array(iid, np.int32))
        f.create_dataset("rating", data=np.array(rating, np.float32))
        f.create_dataset("timestamp", data=np.array(stamp, np.int32))


_ADULT_CATS = {
    "workclass": ["Private", "Self-emp-not-inc", "Local-gov", "State-gov", "Self-emp-inc", "Federal-gov", "?"],
    "education": ["HS-grad", "Some-college", "Bachelors", "Masters", "Assoc-voc", "11th", "Doctorate", "9th"],
    "marital": ["Married-civ-spouse", "Never-married", "Divorced", "Separated", "Widowed"],
    "occupation": ["Prof-specialty", "Craft-repair", "Exec-managerial", "Adm-clerical", "Sales", "Other-service",
                   "Machine-op-inspct", "?"],
    "relationship": ["Husband", "Not-in-family", "Own-child", "Unmarried", "Wife", "Other-relative"],
    "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"],
    "sex": ["Male", "Female"],
    "country": ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India", "?"],
}
_EDU_NUM = {"HS-grad": 9, "Some-college": 10, "Bachelors": 13, "Masters": 14, "Assoc-voc": 11, "11th": 7,
            "Doctorate": 16, "9th": 5}


def adult(dest: Path, rows: int = 6000, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    pick = {k: rng.choice(len(v), rows, p=np.linspace(2, 1, len(v)) / np.linspace(2, 1, len(v)).sum())
            for k, v in _ADULT_CATS.items()}
    age = rng.integers(17, 80, rows)
    hours = np.clip(rng.normal(40, 12, rows), 1, 99).astype(int)
    gain = np.where(rng.random(rows) < 0.08, rng.integers(1000, 20000, rows), 0)
    loss = np.where(rng.random(rows) < 0.05, rng.integers(200, 3000, rows), 0)
    edu = np.array([_EDU_NUM[_ADULT_CATS["education"][i]] for i in pick["education"]])
    married = pick["marital"] == 0
    logit = -9.5 + 0.45 * edu + 0.04 * np.minimum(age, 60) + 0.03 * hours + 1.5 * married + 2.5 * (gain > 5000)
    rich = rng.random(rows) < 1 / (1 + np.exp(-logit))
    lines = []
    for i in range(rows):
        c = {k: _ADULT_CATS[k][pick[k][i]] for k in _ADULT_CATS}
        fields = [age[i], c["workclass"], rng.integers(20000, 500000), c["education"], edu[i], c["marital"],
                  c["occupation"], c["relationship"], c["race"], c["sex"], gain[i], loss[i], hours[i],
                  c["country"], ">50K" if rich[i] else "<=50K"]
        lines.append(", ".join(str(f) for f in fields))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")


def carvana(dest: Path, count: int = 96, size: int = 32, seed: int = 0) -> None:
    from PIL import Image
    rng = np.random.default_rng(seed)
    (dest / "imgs").mkdir(parents=True, exist_ok=True)
    (dest / "masks").mkdir(parents=True, exist_ok=True)
    yy, xx = np.mgrid[:size, :size]
    for i in range(count):
        img = rng.normal(110, 25, (size, size, 3)) + 20 * np.sin(xx / rng.uniform(3, 9))[..., None]
        mask = np.zeros((size, size), bool)
        for _ in range(rng.integers(1, 4)):
            cy, cx = rng.uniform(size / 6, size * 5 / 6, 2)
            ry, rx = rng.uniform(size / 12, size / 4, 2)
            mask |= ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
        side = size // 6
        sy, sx = rng.integers(0, size - side, 2)
        img[sy:sy + side, sx:sx + side] = rng.uniform(0, 255, 3)
        img[mask] = rng.uniform(150, 255, 3) + rng.normal(0, 10, (mask.sum(), 3))
        name = f"{i:05d}"
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(dest / "imgs" / f"{name}.jpg", quality=95)
        Image.fromarray((mask * 255).astype(np.uint8)).convert("P").save(dest / "masks" / f"{name}_mask.gif")


def _adult_arrays(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adult-like numerical fields, categorical strings and income labels (the ``adult`` model)."""
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 80, rows)
    edu = rng.integers(3, 17, rows)
    hours = np.clip(rng.normal(40, 12, rows).round(), 1, 99)
    gain = np.where(rng.random(rows) < 0.08, rng.integers(1000, 20000, rows), 0)
    loss = np.where(rng.random(rows) < 0.05, rng.integers(200, 3000, rows), 0)
    fnlwgt = rng.integers(20000, 500000, rows)
    pick = {k: rng.integers(0, len(v), rows) for k, v in _ADULT_CATS.items()}
    married = pick["marital"] == 0
    logit = -9.5 + 0.45 * edu + 0.04 * np.minimum(age, 60) + 0.03 * hours + 1.5 * married + 2.5 * (gain > 5000)
    rich = rng.random(rows) < 1 / (1 + np.exp(-logit))
    num = np.stack([age, fnlwgt, edu, gain, loss, hours], 1).astype(np.float32)
    cat = np.stack([np.array(v)[pick[k]] for k, v in _ADULT_CATS.items()], 1).astype(str)
    return num, cat, rich.astype(np.int64)


def rtdl_adult(dest: Path, sizes: tuple[int, int, int] = (3000, 1000, 1000), seed: int = 0) -> None:
    import json
    num, cat, y = _adult_arrays(sum(sizes), seed)
    dest.mkdir(parents=True, exist_ok=True)
    start = 0
    for part, size in zip(("train", "val", "test"), sizes):
        np.save(dest / f"N_{part}.npy", num[start:start + size])
        np.save(dest / f"C_{part}.npy", cat[start:start + size])
        np.save(dest / f"y_{part}.npy", y[start:start + size])
        start += size
    (dest / "info.json").write_text(json.dumps({
        "name": "adult", "basename": "adult", "split": 0, "task_type": "binclass",
        "n_num_features": num.shape[1], "n_cat_features": cat.shape[1],
        "train_size": sizes[0], "val_size": sizes[1], "test_size": sizes[2]}, indent=1))


def ncf_ml1m(dest: Path, users: int = 300, items: int = 500, seen: int = 30, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    taste = rng.normal(size=(users, 4)) @ rng.normal(size=(4, items)) + rng.normal(0, 0.5, (users, items))
    dest.mkdir(parents=True, exist_ok=True)
    train, test, negative = [], [], []
    for u in range(users):
        liked = np.argsort(-taste[u])[:seen]
        liked = rng.permutation(liked)
        for t, i in enumerate(liked[:-1]):
            train.append(f"{u}\t{i}\t{rng.integers(3, 6)}\t{978300000 + t}")
        held = liked[-1]
        test.append(f"{u}\t{held}\t5\t{978300000 + seen}")
        others = rng.choice(np.setdiff1d(np.arange(items), liked), 99, replace=False)
        negative.append("\t".join([f"({u},{held})"] + [str(i) for i in others]))
    (dest / "ml-1m.train.rating").write_text("\n".join(train) + "\n")
    (dest / "ml-1m.test.rating").write_text("\n".join(test) + "\n")
    (dest / "ml-1m.test.negative").write_text("\n".join(negative) + "\n")


def unet3d_cells(dest: Path, train: int = 4, val: int = 1, shape: tuple[int, int, int] = (16, 64, 64),
                 cells: int = 24, seed: int = 0) -> None:
    import h5py
    rng = np.random.default_rng(seed)
    grid = np.stack(np.mgrid[:shape[0], :shape[1], :shape[2]], -1).astype(np.float32)
    for part, count in (("train", train), ("val", val)):
        (dest / part).mkdir(parents=True, exist_ok=True)
        for n in range(count):
            centres = rng.uniform(0, 1, (cells, 3)) * shape
            dist = ((grid[..., None, :] - centres) ** 2 * (4.0, 1.0, 1.0)).sum(-1)
            label = dist.argmin(-1) + 1
            edge = np.zeros(shape, bool)
            for axis in range(3):
                diff = np.diff(label, axis=axis) != 0
                pad = [(0, 0)] * 3
                pad[axis] = (0, 1)
                edge |= np.pad(diff, pad)
            raw = 0.2 + 0.7 * edge + rng.normal(0, 0.1, shape)
            with h5py.File(dest / part / f"vol_{n}.h5", "w") as f:
                f.create_dataset("raw", data=raw.astype(np.float32))
                f.create_dataset("label", data=label.astype(np.uint16))


def modelnet40_h5(dest: Path, train: int = 96, test: int = 32, points: int = 1024, classes: int = 40,
                  seed: int = 0) -> None:
    """dgcnn.pytorch's ModelNet40 HDF5 files (``modelnet40_ply_hdf5_2048/ply_data_{train,test}0.h5``: ``data``
    float32 N x points x 3, ``label`` int N x 1): ten primitive shapes (``_shape``), each in four sizes, as 40
    classes, rotated about z, scaled and jittered."""
    import h5py
    rng = np.random.default_rng(seed)
    folder = dest / "modelnet40_ply_hdf5_2048"
    folder.mkdir(parents=True, exist_ok=True)
    for part, count in (("train", train), ("test", test)):
        data = np.zeros((count, points, 3), np.float32)
        label = rng.integers(0, classes, (count, 1))
        for i in range(count):
            p, _ = _shape(int(label[i, 0]) % 10, points, rng)
            theta = rng.random() * 2 * np.pi
            rot = np.array([[np.cos(theta), -np.sin(theta), 0], [np.sin(theta), np.cos(theta), 0], [0, 0, 1]])
            size = 0.4 + 0.2 * (int(label[i, 0]) // 10)
            data[i] = (p * size * rng.uniform(0.9, 1.1, 3)) @ rot.T + rng.normal(0, 0.01, (points, 3))
        with h5py.File(folder / f"ply_data_{part}0.h5", "w") as f:
            f.create_dataset("data", data=data)
            f.create_dataset("label", data=label.astype(np.uint8))


def _gin_write(path: Path, graphs: list[tuple[list[int], int, list[set[int]]]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [str(len(graphs))]
    for tags, label, adj in graphs:
        lines.append(f"{len(tags)} {label}")
        for tag, nbrs in zip(tags, adj):
            lines.append(" ".join(map(str, [tag, len(nbrs), *sorted(nbrs)])))
    path.write_text("\n".join(lines) + "\n")


def gin_graphs(dest: Path, seed: int = 0) -> None:
    """powerful-gnns' ``dataset/MUTAG/MUTAG.txt`` and ``dataset/IMDBBINARY/IMDBBINARY.txt`` (see the module's list)."""
    rng = np.random.default_rng(seed)
    mutag = []
    for i in range(188):
        n = int(rng.integers(10, 29))
        ring = int(rng.integers(5, 8))
        adj: list[set[int]] = [set() for _ in range(n)]

        def edge(a: int, b: int) -> None:
            adj[a].add(b)
            adj[b].add(a)
        for j in range(ring):
            edge(j, (j + 1) % ring)
        tags = [0] * ring + [int(rng.choice([0, 1, 4, 5, 6])) for _ in range(n - ring)]
        for j in range(ring, n):
            edge(j, int(rng.integers(0, j)))
        label = i % 2
        if label:  # the motif: a node tagged 3 between two tagged 2, hung off the ring
            a = int(rng.integers(0, ring))
            tags[n - 3:] = [2, 3, 2]
            for j in range(n - 3, n):
                for k in list(adj[j]):
                    adj[k].discard(j)
                adj[j] = set()
            edge(a, n - 2)
            edge(n - 3, n - 2)
            edge(n - 2, n - 1)
        else:
            tags = [t if t not in (2, 3) else 0 for t in tags]
            tags[n - 1] = 2
        mutag.append((tags, 1 if label else -1, adj))
    _gin_write(dest / "dataset" / "MUTAG" / "MUTAG.txt", mutag)
    imdb = []
    for i in range(500):
        n = int(rng.integers(12, 31))
        adj = [set() for _ in range(n)]
        label = i % 2
        if label:  # a few dense cliques sharing the ego node
            groups = np.array_split(np.arange(1, n), int(rng.integers(2, 4)))
            for g in groups:
                for a in g:
                    for b in g:
                        if a < b and rng.random() < 0.9:
                            adj[a].add(int(b))
                            adj[b].add(int(a))
        else:  # one sparse community
            for a in range(1, n):
                for b in range(a + 1, n):
                    if rng.random() < 0.15:
                        adj[a].add(b)
                        adj[b].add(a)
        for a in range(1, n):
            adj[0].add(a)
            adj[a].add(0)
        imdb.append(([0] * n, label, adj))
    _gin_write(dest / "dataset" / "IMDBBINARY" / "IMDBBINARY.txt", imdb)


def ngcf_ratings(dest: Path, users: int = 300, items: int = 400, seen: int = 24, seed: int = 0) -> None:
    """NGCF-PyTorch's ``train.txt`` / ``test.txt`` under ``dest`` (see the module's list)."""
    rng = np.random.default_rng(seed)
    taste = rng.normal(size=(users, 4)) @ rng.normal(size=(4, items)) + rng.normal(0, 0.5, (users, items))
    dest.mkdir(parents=True, exist_ok=True)
    train, test = [], []
    for u in range(users):
        pool = np.flatnonzero(rng.random(items) < 0.4)
        liked = pool[np.argsort(-taste[u, pool])[:seen]]
        liked = rng.permutation(liked)
        cut = int(0.8 * seen)
        train.append(" ".join(map(str, [u, *liked[:cut]])))
        test.append(" ".join(map(str, [u, *liked[cut:]])))
    (dest / "train.txt").write_text("\n".join(train) + "\n")
    (dest / "test.txt").write_text("\n".join(test) + "\n")


def rgb_shapes(dest: Path, count: int = 1024, size: int = 32, seed: int = 0) -> None:
    """An ImageFolder tree of 32 x 32 RGB shape scenes for pytorch-ddpm (see the module's list)."""
    from PIL import Image
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / (size - 1)
    for i in range(count):
        kind = i % 3
        c0, c1, c2 = rng.uniform(0, 255, (3, 3))
        t = rng.uniform(0, 2 * np.pi)
        ramp = (np.cos(t) * xx + np.sin(t) * yy + 1.5) / 3
        img = c0 * ramp[..., None] + c1 * (1 - ramp[..., None])
        cx, cy, r = rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7), rng.uniform(0.12, 0.25)
        if kind == 0:
            mask = (xx - cx) ** 2 + (yy - cy) ** 2 < r ** 2
        elif kind == 1:
            mask = (abs(xx - cx) < r) & (abs(yy - cy) < r)
        else:
            mask = (yy - cy < r) & (yy - cy > -r + 2 * abs(xx - cx))
        img[mask] = c2
        folder = dest / ("disc", "square", "triangle")[kind]
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(folder / f"{i:05d}.png")


if __name__ == "__main__":
    globals()[sys.argv[1]](Path(sys.argv[2]))
