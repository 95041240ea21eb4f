"""The example notebook (python/examples/quickstart.ipynb), executed with
nbclient against the real service, as a reader would run it. With
SLUICE_UPDATE_NOTEBOOK=1 the executed notebook is written back, so that
the output committed with it is a real run's."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import write
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def _text(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.output_type == "stream":
            out.append(o.text)
        elif "data" in o:
            out.append(o.data.get("text/plain", ""))
        elif o.output_type == "error":
            out.append("\n".join(o.traceback))
    return "".join(out)


def test_the_committed_notebook_holds_a_runs_output():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in _code_cells(nb):
        assert cell.outputs, f"cell without output (execute it: SLUICE_UPDATE_NOTEBOOK=1):\n{cell.source}"
        assert not any(o.output_type == "error" for o in cell.outputs), _text(cell)


def test_the_notebook_runs(service, tmp_path, monkeypatch):
    src = service.roots["a1"] / "quickstart" / "run42"
    for i in range(3):
        write(src / f"r{i:02}.h5", 12 << 20, seed=i)
    for i in range(20):
        write(src / "meta" / f"m{i:02}.json", 2000 + i, seed=i)
    monkeypatch.setenv("SLUICE_EXAMPLE_SOURCE", "sluice://a1/quickstart/run42")
    monkeypatch.setenv("SLUICE_EXAMPLE_DEST", "sluice://a2/quickstart/run42")
    # The kernel is this Python (where sluice is installed), whatever
    # kernels the machine has.
    kernels = tmp_path / "jupyter" / "kernels" / "python3"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    cells = _code_cells(nb)
    texts = [_text(c) for c in cells]
    for cell, text in zip(cells, texts):
        assert not any(o.output_type == "error" for o in cell.outputs), text
    everything = "\n".join(texts)
    assert "User(name='admin'" in texts[0]
    assert "23 files, 37.8 MB" in everything
    assert "stream(s)," in everything and "MB/s" in everything
    assert "done: 23 files, 37.8 MB" in everything
    assert "100%" in everything and "23/23 files" in everything  # the progress bar's end
    assert "23 of 23 files were already in place" in everything
    assert "no-such-file.h5:" in everything
    for i in range(3):
        assert (service.roots["a2"] / "quickstart" / "run42" / f"r{i:02}.h5").read_bytes() == (src / f"r{i:02}.h5").read_bytes()
    if os.environ.get("SLUICE_UPDATE_NOTEBOOK"):
        nbformat.write(nb, NOTEBOOK)
