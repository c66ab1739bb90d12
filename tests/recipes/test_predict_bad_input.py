"""`overt predict` and `overt export` on bad input: each case from the adversarial campaign (issue 26)
reproduced, and each answered by a clear error (exit 2, or 1 when the output cannot be written) or a
correct answer -- never a traceback, never a silently wrong result."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO


@pytest.fixture
def predict(capsysbinary, monkeypatch):
    """`overt predict RUN ARGS`: in this process (stdin from ``stdin``), or in a bash subprocess when
    ``shell_redirect`` (e.g. ``>&-``, ``<&-``, ``>/dev/full``) closes or redirects a standard stream."""
    from overt.cli import main

    def run(run_dir, *args, stdin: bytes | None = None, shell_redirect: str = ""):
        if shell_redirect:
            env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            cmd = [sys.executable, "-m", "overt", "predict", str(run_dir), *map(str, args)]
            line = " ".join(f"'{c}'" for c in cmd) + " " + shell_redirect
            return subprocess.run(["bash", "-c", line], env=env, stderr=subprocess.PIPE, timeout=300, cwd=REPO)
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin or b"")))
        code = main(["predict", str(run_dir), *map(str, args)])
        out = capsysbinary.readouterr()
        return subprocess.CompletedProcess([], code, out.out, out.err)

    return run


def clear_error(proc, code: int, *words: str) -> str:
    err = proc.stderr.decode() if isinstance(proc.stderr, bytes) else proc.stderr
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


def test_non_utf8_csv(runs, predict, tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("f0,f1,f2,f3\n1,2,3,\xe94\n".encode("latin-1"))
    clear_error(predict(runs("tiny"), path), 2, "is not UTF-8 text", "line 2")


def test_a_128_kib_cell(runs, predict, tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("1,2,3," + "9" * (128 * 1024) + "\n")
    clear_error(predict(runs("tiny"), path), 2, "row 0, column f3")


def test_binary_stdin(runs, predict):
    clear_error(predict(runs("tiny"), "--format", "csv", stdin=b"\x00\xff\xfe\x81binary"), 2, "stdin is not UTF-8")


def test_a_zero_byte_npy(runs, predict, tmp_path):
    path = tmp_path / "empty.npy"
    path.write_bytes(b"")
    clear_error(predict(runs("tiny"), path), 2, "is not a readable .npy file")


def test_closed_stdin_and_closed_stdout(runs, predict, tmp_path):
    clear_error(predict(runs("tiny"), "--format", "csv", shell_redirect="<&-"), 2, "stdin is closed")
    rows = tmp_path / "rows.csv"
    rows.write_text("3,-3,0,0\n")
    clear_error(predict(runs("tiny"), rows, shell_redirect=">&-"), 2, "stdout is closed")


def test_stdout_to_a_full_device(runs, predict, tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    rows = tmp_path / "rows.csv"
    rows.write_text("3,-3,0,0\n" * 50)
    clear_error(predict(runs("tiny"), rows, shell_redirect=">/dev/full"), 1, "cannot write the predictions to stdout")


@pytest.mark.parametrize("size", ["0", "-1"])
def test_batch_size_zero_or_negative(runs, predict, tmp_path, size):
    rows = tmp_path / "rows.csv"
    rows.write_text("3,-3,0,0\n")
    clear_error(predict(runs("tiny"), rows, "--batch-size", size), 2, "is not a positive number of inputs")


def test_a_bogus_device(runs, predict, tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("3,-3,0,0\n")
    clear_error(predict(runs("tiny"), rows, "--device", "bogus"), 2, "--device 'bogus' is not a device")


def test_a_broken_config_yaml(runs, predict, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(runs("tiny"), run)
    (run / "config.yaml").write_text("recipe: [tiny\nepochs: {{\n")
    rows = tmp_path / "rows.csv"
    rows.write_text("3,-3,0,0\n")
    clear_error(predict(run, rows), 2, "config.yaml")


def test_csv_with_a_bom_keeps_every_row_and_its_header(runs, predict, tmp_path):
    named, plain = tmp_path / "named.csv", tmp_path / "plain.csv"
    named.write_bytes("\ufefff0,f1,f2,f3\n3,-3,0,0\n-3,3,0,0\n".encode("utf-8"))
    plain.write_bytes("\ufeff3,-3,0,0\n-3,3,0,0\n".encode("utf-8"))
    for path in (named, plain):
        proc = predict(runs("tiny"), path)
        assert proc.returncode == 0, proc.stderr
        assert [json.loads(line)["class"] for line in proc.stdout.decode().splitlines()] == [1, 0]


def test_csv_with_an_unclosed_quote(runs, predict, tmp_path):
    path = tmp_path / "quote.csv"
    path.write_text('3,-3,0,0\n-3,"3,0,0\n1,1,1,1\n')
    clear_error(predict(runs("tiny"), path), 2, "line")


def test_extra_cells_are_an_error_not_dropped(runs, predict, tmp_path):
    path = tmp_path / "extra.csv"
    path.write_text("f0,f1,f2,f3\n3,-3,0,0\n-3,3,0,0,7\n")
    clear_error(predict(runs("tiny"), path), 2, "line 3: 5 cells, the header's 4")
    path.write_text("3,-3,0,0\n-3,3,0,0,7\n")
    clear_error(predict(runs("tiny"), path), 2, "line 2: 5 cells")


def test_nan_and_inf_inputs_are_named_by_row_and_column(runs, predict, tmp_path):
    path = tmp_path / "nan.csv"
    path.write_text("f0,f1,f2,f3\n3,-3,0,0\n1,nan,0,inf\n")
    err = clear_error(predict(runs("tiny"), path), 2, "row 1, column f1 (NaN)", "row 1, column f3 (inf)")
    assert "NaN or infinite" in err
    npy = tmp_path / "nan.npy"
    np.save(npy, np.array([[3.0, -3.0, 0.0, 0.0], [0.0, 0.0, -np.inf, 0.0]]))
    clear_error(predict(runs("tiny"), npy), 2, "row 1, column f2 (-inf)")


def test_the_output_is_strict_json(runs, predict, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("3,-3,0,0\n1e30,-1e30,0,0\n")
    proc = predict(runs("tiny"), path, "--raw")
    assert proc.returncode == 0
    for line in proc.stdout.decode().splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in the output"))


def test_options_after_the_inputs(runs, predict, tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text("3,-3,0,0\n")
    proc = predict(runs("tiny"), path, "--batch-size", "1", "--top-k", "1")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["top"]) == 1


def export(capsys, *args: str) -> subprocess.CompletedProcess:
    from overt.cli import main

    code = main(["export", *args])
    out = capsys.readouterr()
    return subprocess.CompletedProcess([], code, out.out, out.err)


def test_export_refuses_to_overwrite_the_runs_weights(runs, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(runs("tiny"), run)
    before = hashlib.sha256((run / "model.safetensors").read_bytes()).hexdigest()
    proc = export(capsys, str(run), "--format", "pt2", "--out", str(run / "model.safetensors"))
    clear_error(proc, 2, "would overwrite a file of the run")
    assert hashlib.sha256((run / "model.safetensors").read_bytes()).hexdigest() == before
    clear_error(export(capsys, str(run), "--format", "pt2", "--out", str(run / "config.yaml")), 2)


@pytest.mark.parametrize("samples", ["0", "-3"])
def test_export_samples_must_be_positive(runs, tmp_path, capsys, samples):
    proc = export(capsys, str(runs("tiny")), "--format", "pt2", "--samples", samples, "--out", str(tmp_path / "m.pt2"))
    clear_error(proc, 2, "the parity check needs at least one sample")
