"""Chapter 05 with PROFILE="full" on a machine without CelebA (and without the hub prior): the setup cell
stops at once, lists everything missing in one message, and names only parameters the notebook has."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gitutor.data import OfflineDataError

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "05_diffusion_user_level.ipynb"
ENVIRONMENT_VARIABLES = {"HF_HOME"}


def _cells():
    return json.loads(NOTEBOOK.read_text())["cells"]


def test_full_profile_setup_lists_all_missing_inputs_and_names_real_parameters(tmp_path):
    cells = _cells()
    parameters = next(c for c in cells if "parameters" in c["metadata"].get("tags", []))
    namespace: dict = {}
    exec("".join(parameters["source"]), namespace)
    names = {k for k in namespace if not k.startswith("__")}
    assert {"PROFILE", "SEED", "DEVICE", "RESULTS_DIR", "DATA_ROOT", "ALLOW_SLOW"} <= names
    setup = next(c for c in cells if "preflight.check" in "".join(c["source"]))
    namespace.update(PROFILE="full", DATA_ROOT=str(tmp_path))
    with pytest.raises(OfflineDataError) as caught:
        exec("".join(setup["source"]), namespace)
    message = str(caught.value)
    assert "CelebA" in message and "identity_CelebA.txt" in message and "list_attr_celeba.txt" in message
    if "diffusion prior" in message:
        assert "`hf download google/ddpm-celebahq-256`" in message
    mentioned = set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", message)) - ENVIRONMENT_VARIABLES
    assert mentioned and mentioned <= names, f"message names {mentioned - names}, not parameters of the notebook"
