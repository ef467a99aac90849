"""Two end-to-end executions of one chapter with the same seed give identical results records, timing rows
aside (issue 15, item 7). Chapter 06 runs with a tiny OVERRIDES budget so the test takes about a minute."""
import json
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")

ROOT = Path(__file__).resolve().parents[1]
TINY = {"n_aux": 240, "n_heldout": 24, "n_ig_targets": 2, "n_ig_batches": 1, "b4_batches": 40, "epochs": 2,
        "ig_iterations": 4, "dlg_iterations": 2, "aux_sizes": [60], "grid_targets": 2}


def _run(tmp_path: Path, name: str) -> dict:
    results = tmp_path / name
    papermill.execute_notebook(str(ROOT / "notebooks" / "06_learning_to_invert.ipynb"), str(tmp_path / f"{name}.ipynb"),
                               kernel_name="python3", cwd=str(ROOT / "notebooks"), progress_bar=False,
                               parameters={"SEED": 3, "RESULTS_DIR": str(results), "OVERRIDES": TINY})
    return json.loads((results / "06_learning_to_invert.json").read_text())


def test_same_seed_gives_identical_rows_and_timings_apart(tmp_path):
    first, second = _run(tmp_path, "first"), _run(tmp_path, "second")
    assert first["rows"] == second["rows"]
    assert first["timings"] and all(row["unit"] == "s" for row in first["timings"])
    assert not any(row["unit"] == "s" for row in first["rows"]), "wall-clock rows belong in timings"
