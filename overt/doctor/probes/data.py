"""Probe 1, data: one batch's structure, labels vs the model's output width, non-finite
inputs, class balance, input scale, and samples shared by training and validation."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import torch
from torch import nn

from overt.doctor.common import Forward, cut, default_forward, device_of, loader_for, take, to
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict

TESTS = ("one batch's structure, shapes and dtypes; labels against the model's output width; non-finite "
         "inputs; class balance; input scale; exact duplicates shared by training and validation")


def describe_batch(batch: Any) -> str:
    """``(tensor(32, 64) float32, tensor(32,) int64)``."""
    from overt.engine.explain import describe

    return describe(batch)


#: the label key of a dict batch (Hugging Face's ``labels``; datasets often call the column ``label``)
LABEL_KEYS = ("labels", "label")
#: the inputs of a dict batch, by preference; otherwise its one remaining tensor
INPUT_KEYS = ("input_ids", "pixel_values", "input_values", "inputs", "x")
#: keys of a dict batch that describe the inputs, not the inputs themselves
SIDE_KEYS = ("attention_mask", "token_type_ids", "position_ids", "special_tokens_mask")
#: ignored label positions (CrossEntropyLoss's and Hugging Face's ignore_index)
IGNORE_INDEX = -100


def batch_pair(batch: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(inputs, targets) of one batch: an (inputs, target) pair of tensors, or a dict batch (the Hugging
    Face format) with a ``labels`` tensor and ``input_ids`` (or one other input tensor).  Token ids
    where ``attention_mask`` is 0 become -1, so padding never makes two equal samples differ."""
    if isinstance(batch, (tuple, list)):
        if len(batch) == 2 and all(isinstance(t, torch.Tensor) for t in batch):
            return batch[0], batch[1]
        return None
    if not isinstance(batch, dict):
        return None
    y = next((batch[k] for k in LABEL_KEYS if isinstance(batch.get(k), torch.Tensor)), None)
    if y is None:
        return None
    x = next((batch[k] for k in INPUT_KEYS if isinstance(batch.get(k), torch.Tensor)), None)
    if x is None:
        rest = [v for k, v in batch.items()
                if isinstance(v, torch.Tensor) and k not in LABEL_KEYS and k not in SIDE_KEYS]
        if len(rest) != 1:
            return None
        x = rest[0]
    mask = batch.get("attention_mask")
    if (isinstance(mask, torch.Tensor) and mask.shape == x.shape and not x.is_floating_point()):
        x = x.masked_fill(mask == 0, -1)
    return x, y


def _cat(parts: list[torch.Tensor]) -> torch.Tensor | None:
    """Batches of token ids padded to their own longest sample: padded again with -1 to the longest."""
    shapes = {tuple(t.shape[1:]) for t in parts}
    if len(shapes) == 1:
        return torch.cat(parts)
    if any(t.dim() != 2 or t.is_floating_point() for t in parts):
        return None
    width = max(t.shape[1] for t in parts)
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1]), value=-1) for t in parts])


def tensors_of(data: Any, *, batch_size: int, seed: int, collate_fn: Any = None,
               max_samples: int = 50_000) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(inputs, targets) of up to ``max_samples`` samples, when batches are (tensor, tensor) pairs
    or dict batches with labels (:func:`batch_pair`)."""
    tensors = getattr(data, "tensors", None)  # a TensorDataset: read it directly
    if isinstance(tensors, tuple) and len(tensors) == 2 and all(isinstance(t, torch.Tensor) for t in tensors):
        return tensors[0][:max_samples], tensors[1][:max_samples]
    xs, ys, n = [], [], 0
    for batch in loader_for(data, batch_size, shuffle=False, seed=seed, collate_fn=collate_fn):
        pair = batch_pair(batch)
        if pair is None:
            return None
        xs.append(pair[0].cpu())
        ys.append(pair[1].cpu())
        n += len(pair[0])
        if n >= max_samples:
            break
    if not xs:
        return None
    x, y = _cat(xs), _cat(ys)
    if x is None or y is None:
        return None
    return x[:max_samples], y[:max_samples]


def row_hashes(x: torch.Tensor) -> list[bytes]:
    """One digest per sample (its exact bytes)."""
    flat = x.detach().cpu().contiguous().reshape(len(x), -1).numpy()
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in flat]


def check_data(train_data: Any, val_data: Any = None, *, model: nn.Module | None = None,
               forward: Forward | None = None, batch_size: int = 64, seed: int = 0, collate_fn: Any = None,
               max_samples: int = 50_000) -> ProbeResult:
    """Probe 1 on its own: ``train_data``/``val_data`` are Datasets or DataLoaders; with ``model``
    the labels are checked against its output width (on a copy: the model is not changed)."""
    r = ProbeResult("data", "Data", TESTS)
    forward = forward or default_forward
    try:
        batch = take(loader_for(train_data, batch_size, shuffle=True, seed=seed, collate_fn=collate_fn), 1)[0]
    except (IndexError, StopIteration):
        r.verdict, r.summary = Verdict.FAIL, "the training data yields no batch"
        r.fix = "check that the training data set is not empty"
        return r
    structure = describe_batch(batch)
    r.evidence["batch"] = structure
    r.lines.append(f"first training batch: {structure}")
    problems: list[str] = []
    warnings: list[str] = []

    width = None
    if model is not None:
        width = _output_width(r, model, forward, cut(batch, 8), problems)

    pair = tensors_of(train_data, batch_size=batch_size, seed=seed, collate_fn=collate_fn, max_samples=max_samples)
    val_pair = (None if val_data is None else
                tensors_of(val_data, batch_size=batch_size, seed=seed, collate_fn=collate_fn, max_samples=max_samples))
    if pair is None:
        r.lines.append("batches are neither (inputs, target) tensor pairs nor dicts with a labels tensor: "
                       "label, balance, scale and overlap checks skipped")
    else:
        x, y = pair
        r.evidence["train_samples_checked"] = len(x)
        if val_pair is not None:
            r.evidence["val_samples_checked"] = len(val_pair[0])
        _labels(r, y, width, problems, warnings)
        for name, xs in (("training", x), ("validation", None if val_pair is None else val_pair[0])):
            if xs is not None:
                _finite(r, name, xs, problems)
        _scale(r, x, warnings)
        if val_pair is not None:
            _overlap(r, x, val_pair[0], problems, warnings)
    if problems:
        r.verdict, r.summary = Verdict.FAIL, "; ".join(problems)
    elif warnings:
        r.verdict, r.summary = Verdict.WARN, "; ".join(warnings)
    elif pair is None:  # nothing was checked beyond the first batch's structure: never a pass
        r.verdict = Verdict.SKIPPED
        r.summary = (f"skipped: batches are {structure}, with no (inputs, target) pair or labels tensor "
                     "to check labels, balance, scale and overlap on")
    else:
        r.summary = _clean_summary(r)
    return r


def _clean_summary(r: ProbeResult) -> str:
    e = r.evidence
    parts = [f"{e.get('train_samples_checked', '?')} training samples"]
    if "val_samples_checked" in e:
        parts.append(f"{e['val_samples_checked']} validation")
    if "classes" in e:
        parts.append(f"{e['classes']} classes, balance {e['balance']:.2f}")
    if "input_range" in e:
        lo, hi = e["input_range"]
        parts.append(f"inputs in [{lo:.3g}, {hi:.3g}]")
    if "overlap" in e:
        parts.append(f"{e['overlap']} shared with validation")
    return ", ".join(parts)


def _output_width(r: ProbeResult, model: nn.Module, forward: Forward, batch: Any,
                  problems: list[str]) -> int | None:
    probe = copy.deepcopy(model)
    device = device_of(probe)
    inputs = batch[0] if isinstance(batch, (tuple, list)) and batch else None
    params = [p for p in probe.parameters() if p.is_floating_point()]
    if isinstance(inputs, torch.Tensor) and inputs.is_floating_point() and params and inputs.dtype != params[0].dtype:
        msg = (f"the inputs are {inputs.dtype} but the model's parameters are {params[0].dtype}: the first "
               "layer fails or computes in the wrong precision.")
        fix = ("convert the features in the dataset "
               "(e.g. torch.tensor(x, dtype=torch.float32)).")
        r.find("dtype-mismatch", msg, fix=fix, where="training batch, inputs")
        r.evidence["forward_error"] = f"inputs {inputs.dtype}, parameters {params[0].dtype}"
        problems.append(f"inputs are {inputs.dtype}, the model is {params[0].dtype}")
        return None
    try:
        with torch.no_grad():
            probe.eval()
            output, target = forward(probe, to(batch, device))
    except Exception as exc:  # the user's model failed on a real batch: say where
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        problems.append(f"the model fails on a training batch: {type(exc).__name__}: {text}")
        r.evidence["forward_error"] = f"{type(exc).__name__}: {text}"
        r.fix = "make the model's first layer match the batch (see the batch's shapes and dtypes above)"
        return None
    if isinstance(output, torch.Tensor):
        r.evidence["output"] = f"tensor{tuple(output.shape)} {str(output.dtype).replace('torch.', '')}"
        r.lines.append(f"model output for 8 samples: {r.evidence['output']}")
        if output.dim() >= 2:
            return class_width(output, target)
    return None


def class_width(output: torch.Tensor, target: Any) -> int | None:
    """How many classes ``output`` scores: dimension 1 (PyTorch's ``(N, C, d1, ...)`` convention,
    and every 2-d output), or the last dimension when the integer targets have the output's shape
    without it (``(N, T, V)`` logits of a language model with ``(N, T)`` targets, flattened by its
    loss).  None when the shapes cannot say which (``T == V``, or neither fits): the label checks
    then stay silent rather than guess."""
    if output.dim() == 2 or not isinstance(target, torch.Tensor) or target.is_floating_point():
        return int(output.shape[1])
    channels_first = tuple(target.shape) == (output.shape[0], *output.shape[2:])
    channels_last = tuple(target.shape) == tuple(output.shape[:-1])
    if channels_first != channels_last:
        return int(output.shape[1] if channels_first else output.shape[-1])
    return None


def _labels(r: ProbeResult, y: torch.Tensor, width: int | None, problems: list[str], warnings: list[str]) -> None:
    r.evidence["target_dtype"] = str(y.dtype).replace("torch.", "")
    if y.is_floating_point() or y.dtype == torch.bool or y.numel() == 0:
        r.lines.append(f"targets: {r.evidence['target_dtype']} values (not class indices)")
        return
    flat = y.reshape(-1)
    flat = flat[flat != IGNORE_INDEX]  # positions the loss ignores (padding, prompt tokens)
    if flat.numel() == 0:
        r.lines.append(f"labels: every one is {IGNORE_INDEX} (ignored by the loss)")
        return
    lo, hi = int(flat.min()), int(flat.max())
    r.evidence["label_range"] = [lo, hi]
    classes = width if width is not None else hi + 1
    r.lines.append(f"labels: {r.evidence['target_dtype']} in [{lo}, {hi}]"
                   + (f"; the model outputs {width} values per sample" if width is not None else ""))
    bad = int(((flat < 0) | (flat >= classes)).sum())
    if lo < 0 or hi >= classes:
        msg = (f"{bad} label(s) outside [0, {classes}) (min {lo}, max {hi}) but the model outputs {classes} "
               f"classes. On CUDA this is a device-side assert far from the cause.")
        fix = (f"make the last layer "
               f"{max(hi + 1, classes)} wide, or remap the labels to 0..{classes - 1} (1-based labels: y - 1).")
        r.find("label-out-of-range", msg, fix=fix, where="training labels", bad=bad)
        problems.append(f"{bad} label(s) outside [0, {classes})")
        return
    counts = torch.bincount(flat, minlength=classes)[:classes]
    present = counts[counts > 0]
    balance = float(present.min()) / float(present.max())
    r.evidence.update(classes=classes, class_counts=counts.tolist(), balance=round(balance, 4))
    r.lines.append(f"class counts (train): {counts.tolist()} (smallest/largest = {balance:.2f})")
    absent = [i for i, c in enumerate(counts.tolist()) if c == 0]
    if absent and width is not None:
        warnings.append(f"{len(absent)} of {classes} classes never occur in the training data ({absent[:10]})")
        r.causes.append("the output layer is wider than the number of classes, or a class was lost in the split")
    if balance < 0.1:
        warnings.append(f"classes are imbalanced: the smallest has {balance:.1%} of the largest's samples")
        r.causes.append("a strongly imbalanced label distribution: accuracy will mostly reflect the large classes")
        r.fix = r.fix or ("weight the loss (CrossEntropyLoss(weight=...)) or sample classes evenly "
                          "(WeightedRandomSampler), and report per-class metrics")


def _finite(r: ProbeResult, name: str, x: torch.Tensor, problems: list[str]) -> None:
    if not x.is_floating_point():
        return
    bad_rows = (~torch.isfinite(x.reshape(len(x), -1))).any(dim=1)
    n_bad = int(bad_rows.sum())
    if n_bad:
        rows = bad_rows.nonzero().reshape(-1)[:5].tolist()
        msg = (f"{n_bad} {name} sample(s) contain NaN or inf (first: index {', '.join(map(str, rows))}); one of "
               "them in a batch makes the loss and every weight it touches non-finite.")
        fix = ("clean or impute "
               "these values in preprocessing.")
        r.find("non-finite", msg, fix=fix, where=f"{name} inputs, samples {rows}", samples=n_bad)
        problems.append(f"{n_bad} {name} sample(s) with NaN/inf inputs")


def _scale(r: ProbeResult, x: torch.Tensor, warnings: list[str]) -> None:
    if not x.is_floating_point():
        r.lines.append(f"inputs: {str(x.dtype).replace('torch.', '')} (not checked for scale)")
        return
    finite = x[torch.isfinite(x)] if not torch.isfinite(x).all() else x
    if finite.numel() == 0:
        return
    flat = finite.double()
    lo, hi = float(flat.min()), float(flat.max())
    mean, std = float(flat.mean()), float(flat.std()) if flat.numel() > 1 else 0.0
    r.evidence.update(input_range=[lo, hi], input_mean=mean, input_std=std)
    r.lines.append(f"inputs: range [{lo:.4g}, {hi:.4g}], mean {mean:.4g}, std {std:.4g}")
    large = max(abs(lo), abs(hi))
    if x.dim() == 2 and x.shape[1] > 1 and torch.isfinite(x).all():
        stds = x.double().std(dim=0)
        live = stds[stds > 0]
        if len(live) > 1:
            ratio = float(live.max() / live.min())
            r.evidence["feature_std_ratio"] = ratio
            if ratio > 1000:
                warnings.append(f"feature scales differ by {ratio:.3g}x (per-feature std {float(live.min()):.3g} "
                                f"to {float(live.max()):.3g})")
                r.causes.append("features on very different scales: the large ones dominate the first layer")
                r.fix = r.fix or "standardise each feature (fit sklearn's StandardScaler on the training split)"
                return
    if large > 50 or std > 10:
        warnings.append(f"inputs are not normalised (largest |x| = {large:.4g}, std {std:.4g})")
        r.causes.append("raw feature values (e.g. pixels 0..255): large activations, saturated units and "
                        "a learning rate that no longer fits")
        r.fix = r.fix or "scale the inputs to about unit range (divide pixels by 255, standardise features)"


def _overlap(r: ProbeResult, x_train: torch.Tensor, x_val: torch.Tensor, problems: list[str],
             warnings: list[str]) -> None:
    """Validation rows identical to a training row: a failure from ``FAIL_SHARE`` of the
    validation set on (its metrics are meaningless), a warning below."""
    from overt.catalog import Severity
    from overt.guards.overlap import FAIL_SHARE

    train = set(row_hashes(x_train))
    val = row_hashes(x_val)
    shared = [i for i, h in enumerate(val) if h in train]
    r.evidence["overlap"] = len(shared)
    r.lines.append(f"validation samples identical to a training sample: {len(shared)} of {len(val)} "
                   f"(rows hashed exactly)")
    if shared:
        share = len(shared) / max(len(val), 1)
        said = f"{len(shared)} validation sample(s) ({share:.1%}) also appear in the training data"
        bad = share >= FAIL_SHARE
        (problems if bad else warnings).append(said + (": validation measures memorisation" if bad else ""))
        r.find("val-overlaps-train",
               f"{said}: validation "
               f"{'measures memorisation, so its metrics are meaningless' if bad else 'is optimistic'}.",
               fix="split the data once into disjoint parts and de-duplicate it before splitting.",
               where="validation data", severity=None if bad else Severity.WARNING, shared=len(shared))
        r.evidence["overlap_examples"] = shared[:10]
        r.causes.append("duplicates across the split (leakage): validation overstates how well the model generalises")
        r.fix = r.fix or "de-duplicate the data before splitting (hash the rows), then split"


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return check_data(setup.train_data, setup.val_data, model=setup.model, forward=setup.forward,
                      batch_size=setup.cfg.batch_size, seed=setup.cfg.seed, collate_fn=setup.collate_fn)


def _blocks(r: ProbeResult) -> dict[str, str]:
    error = r.evidence.get("forward_error")
    return {"forward": f"the model cannot run a training batch ({error})"} if error else {}


def _risks(readiness: Any, r: ProbeResult) -> list[tuple[int, str]]:
    e, risks = r.evidence, []
    if e.get("balance") is not None and e["balance"] < 0.5:
        risks.append((50, f"Class balance: the smallest class has {e['balance']:.0%} of the largest's samples; "
                          f"accuracy on a larger data set with this distribution mostly reflects the large classes: "
                          f"report per-class metrics."))
    if e.get("overlap"):
        risks.append((50, f"Leakage: {e['overlap']} validation sample(s) also occur in the training data, so "
                          f"validation overstates generalisation, more so as the data grows by scraping or merging."))
    return risks


PROBE = Probe("data", "Data", 10, _run, blocks=_blocks, risks=_risks)
