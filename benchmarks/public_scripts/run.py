"""Public training scripts run unmodified under ``overt run``: which findings the guards give on
code they were not built from (issue 33, "no new finding on the public scripts"), and whether the
findings stay the same on a busy machine.

    python benchmarks/public_scripts/run.py --setup            # once: torchvision + gymnasium, see below
    python benchmarks/public_scripts/run.py [--only NAME,...] [--group tuned|fresh] [--load] [--out results.json]

Only manifest.json and patches/ are kept here: no code from the projects.  For each entry of
``manifest.json`` the script's project is exported at its pinned commit from the local mirror
(``/work/.mirror/OWNER+NAME/repo``, a bare git directory made by the session tool ``fetch``;
``--mirrors`` to point elsewhere) into a temporary directory, its patch (data loading and step caps
only) is applied, its data is laid out from ``../shared/data``, and the script is run twice, each
time in a fresh export: plainly (``python script args``: the reference: does it run here at all?)
and under ``python -m overt run --report``.  With ``--load`` the guarded run is repeated while two
CPU-burning processes run, and the two sets of findings are compared (slug, step, where, message;
temporary paths masked): they must be identical, since which steps the guards check depends on the
step count alone (``overt/guards/clock.py``).  Timing findings (``dataloader-starvation``: a
loader that cannot keep up with the steps) measure the machine and are left out of the comparison.

Every run is ``nice -n 5`` with ``OMP_NUM_THREADS=1`` and a subprocess timeout.

Entries with ``"group": "fresh"`` are scripts from projects nobody here had run under overt before
session 45 (issue 33's precision on code not tuned on); ``--group fresh`` (or ``tuned``) runs one set.
``"group": "fresh2"`` (session 47) is split in two halves by ``split-fresh2.json`` (drawn by
``python run.py --split``: the lint corpus's ``draw`` with seed 20261130): ``--group fresh2-dev`` runs
the half checks may be fixed against, ``--group fresh2-test`` the half measured once at the end.
``"group": "fresh3"`` (session 48: pytorch-flows, LTSF-Linear, TCN, torchdiffeq, nlp-tutorial) is split the
same way by ``split-fresh3.json`` (``python run.py --split fresh3``, seed 20261202).
``"group": "fresh4"`` (session 49: five tutorial projects, none in this manifest before) is split by
``split-fresh4.json`` (``python run.py --split fresh4``, seed 20261204).
``"group": "fresh5"`` (session 50: Time-Series-Library, nn-zero-to-hero, pg-is-all-you-need, pytorch-normalizing-flows,
ng-video-lecture) is split by ``split-fresh5.json`` (``python run.py --split fresh5``, seed 20261206).
``"group": "fresh6"`` (session 51: Pytorch-UNet, LightGCN-PyTorch, tabnet, MAML-Pytorch, pytorch-made) is split by
``split-fresh6.json`` (``python run.py --split fresh6``, seed 20261208).
``"group": "fresh7"`` (session 52: NCF, deep-active-learning, continual-learning, pytorch-3dunet,
pytorch-beginner) is split by ``split-fresh7.json`` (``python run.py --split fresh7``, seed 20261210).
``"group": "fresh8"`` (session 53: PyTorch-GAN, disentangling-vae, spotlight, few-shot, vq-vae-2) is split by
``split-fresh8.json`` (``python run.py --split fresh8``, seed 20261212).
``"group": "fresh9"`` (session 54: pytorch-soft-actor-critic, RL-Adventure, DGI, dgcnn.pytorch, practical-pytorch) is
split by ``split-fresh9.json`` (``python run.py --split fresh9``, seed 20261214).
``"group": "fresh10"`` (session 55: minimalRL, TD3, siamese-triplet, gae-pytorch, the Lightning project template) is
split by ``split-fresh10.json`` (``python run.py --split fresh10``, seed 20261216).
``"group": "fresh11"`` (session 56: dlrm, powerful-gnns, PPO-PyTorch, pytorch-ddpm, NGCF-PyTorch) is split by
``split-fresh11.json`` (``python run.py --split fresh11``, seed 20261218).  An
entry's ``notebooks`` are Jupyter notebooks turned into scripts (their code cells in order, IPython magics
commented out: ``notebook_to_script``) before its patch is applied.

Third-party packages the scripts need that the project does not (``torchvision``, ``gymnasium``,
``jsonargparse`` for LightningCLI, ``tyro`` for cleanrl)
go into a separate directory (``--site``, default ``$TMPDIR/overt-public-scripts-site``) put on
the scripts' ``PYTHONPATH``, never into the environment overt is tested in.  ``--setup`` installs
them with pip (``--no-deps``); torchvision's PyPI wheel is built against CUDA, so its compiled ops
(``_C.so``, ``image.so``: nms, roi_align, image decoding) cannot load against the CPU build of
torch: setup removes them and makes the two fake-kernel registrations that need them conditional,
as the others already are.  Nothing the scripts use needs those ops (datasets, transforms,
models, save_image).  A script whose package is missing is reported as skipped.

Prints one line per script and a Markdown table; ``--out`` writes everything as JSON.  A finding
whose slug is not among the entry's ``known`` verdicts (verdicts.md) is marked NEW, and the exit
status is 1 when there is one, when a guarded run wrote no report, or when ``--load`` changed the
findings: each of those needs judging.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# the shared data sets (../shared/data beside the checkout); PUBLIC_SCRIPTS_DATA points elsewhere, for a git
# worktree whose parent holds no shared/ (session 55: /work/wt/NAME, the data in /work/shared/data)
DATA = Path(os.environ.get("PUBLIC_SCRIPTS_DATA") or REPO.parent / "shared" / "data")
MIRRORS = Path("/work/.mirror")
SITE = Path(tempfile.gettempdir()) / "overt-public-scripts-site"
SITE_PACKAGES = ["torchvision==0.28.0", "gymnasium==1.4.0", "cloudpickle==3.1.3", "farama-notifications==0.0.6",
                 "jsonargparse==4.53.0", "docstring-parser==0.18.0", "typeshed-client==2.15.0",
                 "tyro==1.0.17", "shtab==1.13.0", "typeguard==4.6.1",  # these three: cleanrl's command lines
                 "lmdb==3.0.0",  # pytorch-fm's examples/main.py imports its Criteo/Avazu readers
                 "tensorboardX==2.6.2.2", "h5py==3.16.0",  # pytorch-flows' main.py and its datasets package
                 # fresh4: MorvanZhou's tutorials plot as they train; the UvA notebook's tqdm.notebook and
                 # matplotlib_inline need ipywidgets and IPython (MPLBACKEND=Agg: nothing is shown)
                 "matplotlib==3.10.7", "contourpy==1.3.3", "cycler==0.12.1", "fonttools==4.68.0",
                 "kiwisolver==1.5.1", "pyparsing==3.3.3", "ipython==9.18.1", "ipywidgets==8.1.9",
                 "matplotlib-inline==0.2.2", "traitlets==5.16.1", "decorator==5.3.1",
                 "ipython-pygments-lexers==1.1.1", "jedi==0.20.1", "parso==0.8.7", "pexpect==4.9.0",
                 "ptyprocess==0.7.0", "prompt-toolkit==3.0.53", "wcwidth==0.9.4", "pygments==2.21.0",
                 "stack-data==0.6.3", "executing==2.3.0", "asttokens==3.0.2", "pure-eval==0.2.4",
                 "comm==0.2.3", "widgetsnbextension==4.0.16", "jupyterlab-widgets==3.0.17",
                 # fresh5: Time-Series-Library's data_provider imports sktime's .ts reader and patool at import
                 "sktime==1.2.0", "scikit-base==1.2.0", "patool==4.0.7",
                 # fresh6: tabnet's notebooks import wget
                 "wget==3.2",
                 # fresh7: pytorch-3dunet's transforms and metrics import scikit-image
                 "scikit-image==0.26.0", "lazy-loader==0.6", "imageio==2.38.1", "tifffile==2026.3.3",
                 # fresh8: disentangling-vae's utils/visualize.py imports seaborn at import
                 "seaborn==0.13.2"]
#: findings that measure time (as tests/conftest.py's TIMING): a loader that cannot keep up is a fact
#: about the machine's load, so they are shown but left out of the --load comparison
TIMING = frozenset({"dataloader-starvation"})
FRESH2_SEED = 20261130  # the fresh2 halves (split-fresh2.json)
SPLIT_SEEDS = {"fresh2": FRESH2_SEED, "fresh3": 20261202, "fresh4": 20261204, "fresh5": 20261206,
               "fresh6": 20261208, "fresh7": 20261210, "fresh8": 20261212,
               "fresh9": 20261214, "fresh10": 20261216, "fresh11": 20261218}  # each drawn group's seed (split-GROUP.json)
MNIST_TRAIN = 8000  # the first 8,000 t10k digits stand in for the training split, the last 2,000 for test


# ---------------------------------------------------------------- setup

def setup(site: Path) -> None:
    """Install the scripts' extra packages into ``site`` (see the module docstring)."""
    site.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--upgrade", "--target", str(site),
                    *SITE_PACKAGES], check=True, timeout=900)
    tv = site / "torchvision"
    for so in ("_C.so", "image.so"):
        (tv / so).unlink(missing_ok=True)
    meta = tv / "_meta_registrations.py"
    text = meta.read_text()
    for op in ("nms", "qnms"):
        text = text.replace(f'@torch.library.register_fake("torchvision::{op}")',
                            f'@(torch.library.register_fake("torchvision::{op}") '
                            'if torchvision.extension._has_ops() else (lambda f: f))')
    meta.write_text(text)
    out = subprocess.run([sys.executable, "-c", "import torchvision, gymnasium; print(torchvision.__version__)"],
                         env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True, timeout=120)
    print(f"setup: {site}: torchvision {out.stdout.strip() or out.stderr.strip()[-300:]}")


def available(module: str, site: Path) -> bool:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    # 600 s: at a load of 24 on two CPUs, importing torchvision took over 120 s (session 53)
    r = subprocess.run([sys.executable, "-c", f"import {module}"], env=env, capture_output=True, timeout=600)
    return r.returncode == 0


# ---------------------------------------------------------------- data

def _idx(path: Path) -> bytes:
    with gzip.open(path) as f:
        return f.read()


def _write_idx(path: Path, magic: int, dims: tuple[int, ...], payload: bytes) -> None:
    path.write_bytes(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)


def mnist_idx(dest: Path, train: int = MNIST_TRAIN, folder: str = "MNIST") -> None:
    """torchvision's MNIST layout (``dest/MNIST/raw``, uncompressed IDX) from the shared t10k split:
    its first ``train`` digits as the training split, its last 2,000 as the test split.  ``folder``
    names the data set's directory (``FashionMNIST``: the same files where that class looks)."""
    src = DATA / "mnist-t10k"
    images, labels = _idx(src / "t10k-images-idx3-ubyte.gz"), _idx(src / "t10k-labels-idx1-ubyte.gz")
    px = images[16:]
    lab = labels[8:]
    raw = dest / folder / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for name, sl in (("train", slice(0, train)), ("t10k", slice(MNIST_TRAIN, len(lab)))):
        n = sl.stop - sl.start
        _write_idx(raw / f"{name}-images-idx3-ubyte", 0x803, (n, 28, 28), px[sl.start * 784:sl.stop * 784])
        _write_idx(raw / f"{name}-labels-idx1-ubyte", 0x801, (n,), lab[sl])


def cora_standin(dest: Path, seed: int = 0) -> None:
    """A stand-in for Cora's ``cora.content`` (absent from the pygcn mirror: a large file) next to the
    real ``cora.cites`` already in ``dest``: the 2,708 real papers and citations, each paper's class
    a group of whole communities of the real citation graph (Louvain communities dealt, largest first,
    into the smallest of 7 classes, as Cora has 7), and 1,433 binary word features drawn per class (40
    words typical of the class at 12%, every word at 0.5%: about 12 words a paper).  Learnable from
    the words and from the graph, as Cora."""
    import networkx as nx  # only this data kind needs networkx and numpy
    import numpy as np
    edges = [tuple(line.split()) for line in (dest / "cora.cites").read_text().splitlines() if line.strip()]
    graph = nx.Graph(edges)
    papers = sorted(graph.nodes, key=int)
    sizes, label = [0] * 7, {}
    for community in sorted(nx.community.louvain_communities(graph, seed=seed), key=len, reverse=True):
        k = sizes.index(min(sizes))  # each community whole into the smallest class so far
        sizes[k] += len(community)
        label.update({p: f"c{k}" for p in community})
    rng = np.random.default_rng(seed)
    papers = [papers[i] for i in rng.permutation(len(papers))]
    words = rng.permutation(1433)
    rows = []
    for paper in papers:
        k = int(label[paper][1:])
        p = np.full(1433, 0.005)
        p[words[k * 40:(k + 1) * 40]] = 0.12
        bits = (rng.random(1433) < p).astype(int)
        rows.append("\t".join([paper, *map(str, bits), label[paper]]))
    (dest / "cora.content").write_text("\n".join(rows) + "\n")


def lay_data(spec: dict[str, Any], root: Path, site: Path = SITE) -> None:
    kind, dest = spec["kind"], root / spec["dest"]
    if kind == "mnist-idx":
        mnist_idx(dest, spec.get("train", MNIST_TRAIN), spec.get("folder", "MNIST"))
    elif kind == "copy":
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / spec["src"], dest)
    elif kind == "lines":  # lines [start, stop) of a shared data file
        lines = (DATA / spec["src"]).read_text(encoding="utf-8").splitlines(keepends=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text("".join(lines[spec.get("start", 0):spec["stop"]]), encoding="utf-8")
    elif kind == "cora-standin":  # cora.content made from the exported cora.cites (cora_standin)
        cora_standin(dest)
    elif kind == "standin":  # a synthetic data set in the script's own format (standins.py)
        subprocess.run([sys.executable, str(HERE / "standins.py"), spec["name"], str(dest)], check=True,
                       capture_output=True, timeout=600,  # the site's packages for formats like HDF5 (h5py)
                       env={**os.environ, "PUBLIC_SCRIPTS_DATA": str(DATA),  # the stand-ins read the shared data here
                            "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(site)]))})
    elif kind == "tiny-lm":  # a local tiny model + data set for the Hugging Face entries (tiny_lm.py)
        subprocess.run([sys.executable, str(HERE / "tiny_lm.py"), str(DATA / spec["src"]), str(dest / "model"),
                        str(dest / "data")], check=True, capture_output=True, timeout=600,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    else:
        raise ValueError(f"unknown data kind {kind!r}")


def data_present(entry: dict[str, Any]) -> bool:
    for spec in entry.get("data", []):
        if spec["kind"] == "mnist-idx" and not (DATA / "mnist-t10k").is_dir():
            return False
        if spec["kind"] in ("copy", "lines", "tiny-lm") and not (DATA / spec["src"]).exists():
            return False
    return True


# ---------------------------------------------------------------- export and run

def mirror_of(repo: str, mirrors: Path) -> Path:
    """The bare git directory of ``repo``'s mirror (``OWNER+NAME/repo``, or ``OWNER+NAME/repo/.git``)."""
    bare = mirrors / repo.replace("/", "+") / "repo"
    return bare / ".git" if (bare / ".git").is_dir() else bare


def export(entry: dict[str, Any], source: dict[str, Any], mirrors: Path, root: Path, site: Path = SITE) -> None:
    """The project's files at the pinned commit (only the entry's ``paths``), patched, with data."""
    git_dir = mirror_of(source["repo"], mirrors)
    if not git_dir.is_dir():
        raise RuntimeError(f"no mirror of {source['repo']} at {git_dir} (fetch github:{source['repo']})")
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", "--format=tar", source["commit"],
                              *entry.get("paths", [])], capture_output=True, timeout=300)
    if archive.returncode:
        raise RuntimeError(f"git archive {source['repo']}@{source['commit'][:8]}: "
                           f"{archive.stderr.decode(errors='replace').strip()[-300:]}")
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True, timeout=300)
    for notebook in entry.get("notebooks", []):
        notebook_to_script(root / notebook)
    if entry.get("patch"):
        subprocess.run(["git", "apply", str(HERE / "patches" / entry["patch"])],
                       cwd=root, check=True, capture_output=True, timeout=60)
    for spec in entry.get("data", []):
        lay_data(spec, root, site)


def notebook_to_script(notebook: Path) -> Path:
    """A Jupyter notebook's code cells, in order, as the script beside it (``x.ipynb`` -> ``x.py``): what
    "Run All" executes.  IPython's line magics and shell escapes (``%matplotlib inline``, ``!pip``) become
    ``pass`` with the line as a comment (a block may hold nothing else), a cell magic's whole cell is
    commented out; the entry's patch applies to the script."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    out = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        lines = src.splitlines()
        magic_cell = bool(lines) and lines[0].lstrip().startswith("%%")
        out.append("\n".join("# " + line if magic_cell else
                             line[:len(line) - len(line.lstrip())] + "pass  # " + line.lstrip()
                             if line.lstrip().startswith(("%", "!")) else line for line in lines))
    script = notebook.with_suffix(".py")
    script.write_text("\n\n# In[ ]:\n".join(out) + "\n", encoding="utf-8")
    return script


def _env(entry: dict[str, Any], root: Path, site: Path, overt: Path) -> dict[str, str]:
    paths = [str(overt), str(site)] + [str(root / p) for p in entry.get("pythonpath", [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OVERT_", "WANDB"))}
    env.update(PYTHONPATH=os.pathsep.join(paths), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONHASHSEED="0", MPLBACKEND="Agg", WANDB_MODE="disabled", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.update(entry.get("env", {}))
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int | str, float, str]:
    t0 = time.monotonic()
    proc = subprocess.Popen(["nice", "-n", "5", *cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        rc = "timeout"
    return rc, round(time.monotonic() - t0, 1), out.decode(errors="replace")


def _mask(text: str, root: Path) -> str:
    text = text.replace(str(root.resolve()), "<export>").replace(str(root), "<export>")
    return re.sub(r"/tmp/[^\s'\":]*", "<tmp>", text)


def one_run(entry: dict[str, Any], source: dict[str, Any], args: argparse.Namespace, guarded: bool) -> dict[str, Any]:
    """Export, lay out data, run the entry's `pre` commands and its script; the findings if guarded."""
    with tempfile.TemporaryDirectory(prefix="overt-public-") as tmp:
        root = Path(tmp)
        export(entry, source, args.mirrors, root, args.site)
        cwd = root / entry.get("cwd", ".")
        env = _env(entry, root, args.site, args.overt)
        for pre in entry.get("pre", []):
            rc, _, out = _run([sys.executable, *pre], cwd, env, args.timeout)
            if rc != 0:
                return {"rc": f"pre failed ({rc})", "seconds": 0, "tail": _mask(out[-1500:], root)}
        report = root / "overt-findings.json"
        cmd = [sys.executable, *(["-m", "overt", "run", "--report", str(report)] if guarded else []),
               entry["script"], *entry.get("args", [])]
        rc, seconds, out = _run(cmd, cwd, env, entry.get("timeout", args.timeout))
        result: dict[str, Any] = {"rc": rc, "seconds": seconds, "tail": _mask(out[-1500:], root)}
        if guarded:
            found = json.loads(report.read_text())["findings"] if report.exists() else None
            result["findings"] = None if found is None else [
                {k: (_mask(v, root) if isinstance(v, str) else v) for k, v in f.items()
                 if k in ("slug", "severity", "step", "where", "message")} for f in found]
        return result


def key(findings: list[dict[str, Any]] | None) -> list[tuple[Any, ...]] | None:
    if findings is None:
        return None
    return sorted((f["slug"], f.get("step"), f.get("where", ""), f["message"]) for f in findings
                  if f["slug"] not in TIMING)


class Load:
    """Two CPU-burning processes for the duration of a ``with`` block (started and ended by pid)."""

    def __enter__(self) -> "Load":
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self.procs:
            p.kill()
            p.wait(timeout=30)


def split_group(manifest: dict[str, Any], group: str = "fresh2") -> dict[str, Any]:
    """A group's halves, drawn as the lint corpus draws its splits (its ``draw``), with the group's seed."""
    sys.path.insert(0, str(HERE.parent / "lint_corpus"))
    from split import draw  # noqa: E402  (benchmarks/lint_corpus/split.py)
    return draw([e["name"] for e in manifest["scripts"] if e.get("group") == group], SPLIT_SEEDS[group])


def in_group(entry: dict[str, Any], group: str) -> bool:
    if group == "all":
        return True
    name, _, half = group.partition("-")
    if name in SPLIT_SEEDS and half in ("dev", "test"):
        halves = json.loads((HERE / f"split-{name}.json").read_text())
        return entry["name"] in halves[half]
    return entry.get("group", "tuned") == group


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated entry names")
    parser.add_argument("--group", default="all",
                        help="entries whose 'group' is this ('tuned': those with none; 'fresh': scripts nobody "
                             "tuned on, session 45), 'fresh2-dev' / 'fresh2-test' (session 47's halves), "
                             "'fresh3-dev' / 'fresh3-test' (session 48's), 'fresh4-dev' / 'fresh4-test' (session 49's), "
                             "'fresh5-dev' / 'fresh5-test' (session 50's), ... 'fresh11-dev' / 'fresh11-test' (session 56's), or all")
    parser.add_argument("--load", action="store_true", help="repeat each guarded run under 2 CPU burners, compare")
    parser.add_argument("--no-plain", action="store_true", help="skip the unguarded reference runs")
    parser.add_argument("--setup", action="store_true", help="install torchvision and gymnasium into --site and exit")
    parser.add_argument("--split", nargs="?", const="fresh2", choices=sorted(SPLIT_SEEDS), default=None,
                        help="draw a group's halves (default fresh2) into split-GROUP.json and exit")
    parser.add_argument("--site", type=Path, default=SITE, help=f"extra packages for the scripts (default {SITE})")
    parser.add_argument("--mirrors", type=Path, default=MIRRORS,
                        help=f"bare mirrors OWNER+NAME/repo (default {MIRRORS})")
    parser.add_argument("--overt", type=Path, default=REPO,
                        help="the checkout whose overt is measured (default: this one)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per run (an entry may set its own)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args()
    if args.setup:
        setup(args.site)
        return 0
    manifest = json.loads((HERE / "manifest.json").read_text())
    if args.split:
        halves = split_group(manifest, args.split)
        (HERE / f"split-{args.split}.json").write_text(json.dumps(halves, indent=2) + "\n")
        print(f"{args.split}, seed {halves['seed']}: dev {halves['dev']}\n              test {halves['test']}")
        return 0
    only = {n for n in args.only.split(",") if n}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=args.overt, capture_output=True,
                            text=True, timeout=60).stdout.strip() or str(args.overt)
    results: list[dict[str, Any]] = []
    for entry in manifest["scripts"]:
        if only and entry["name"] not in only:
            continue
        if not in_group(entry, args.group):
            continue
        source = manifest["sources"][entry["source"]]
        res: dict[str, Any] = {"name": entry["name"], "repo": source["repo"], "commit": source["commit"],
                               "script": entry["script"], "args": entry.get("args", [])}
        missing = [m for m in entry.get("needs", []) if not available(m, args.site)]
        if missing or not data_present(entry) or not mirror_of(source["repo"], args.mirrors).is_dir():
            res["skipped"] = (f"missing {', '.join(missing)} (run --setup)" if missing else
                              "no mirror" if data_present(entry) else "no data")
            print(f"{entry['name']}: skipped: {res['skipped']}", flush=True)
            results.append(res)
            continue
        if not args.no_plain:
            res["plain"] = one_run(entry, source, args, guarded=False)
        res["guarded"] = one_run(entry, source, args, guarded=True)
        if args.load:
            with Load():
                res["loaded"] = one_run(entry, source, args, guarded=True)
            res["identical"] = key(res["guarded"]["findings"]) == key(res["loaded"]["findings"])
        found = res["guarded"]["findings"]
        slugs = ", ".join(sorted({f["slug"] for f in found})) if found else ("-" if found == [] else "no report")
        print(f"{entry['name']}: plain rc {res.get('plain', {}).get('rc', '-')} "
              f"({res.get('plain', {}).get('seconds', '-')} s), guarded rc {res['guarded']['rc']} "
              f"({res['guarded']['seconds']} s): {len(found or [])} findings: {slugs}"
              + (f"; under load {'identical' if res['identical'] else 'DIFFERENT'} "
                 f"({res['loaded']['seconds']} s)" if args.load else ""), flush=True)
        known = entry.get("known", {})
        res["new"] = sorted({f["slug"] for f in found or []} - set(known))
        for f in found or []:
            tag = "NEW " if f["slug"] not in known else f"known ({known[f['slug']].split(':')[0]}) "
            print(f"    {tag}[{f['slug']}] step {f.get('step')} {f.get('where', '')}: {f['message'][:400]}", flush=True)
        results.append(res)
    print(f"\n| script | plain | overt run | findings |{' load |' if args.load else ''}")
    print(f"|---|---|---|---|{'---|' if args.load else ''}")
    for r in results:
        if "skipped" in r:
            print(f"| {r['name']} | skipped: {r['skipped']} | | |{' |' if args.load else ''}")
            continue
        found = r["guarded"]["findings"]
        cell = ", ".join(f["slug"] for f in found) if found else ("none" if found == [] else "no report")
        load = f" {'identical' if r['identical'] else 'DIFFERENT'} |" if args.load else ""
        print(f"| {r['name']} | {r.get('plain', {}).get('rc', '-')} | {r['guarded']['rc']} | {cell} |{load}")
    if args.out:
        args.out.write_text(json.dumps({"overt_commit": commit, "results": results}, indent=1))
    bad = [r["name"] for r in results if "skipped" not in r and (
        r["guarded"]["findings"] is None or r["new"] or (args.load and not r["identical"]))]
    if bad:
        print(f"\nto judge (a finding not in the entry's 'known' verdicts, no report, or different under load): "
              f"{', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
