import importlib.util
from pathlib import Path

import pytest
import torch

from gitutor.models import LeNet, init_uniform_
from gitutor.seeding import make_generator


@pytest.fixture(autouse=True, scope="session")
def _single_thread():
    """Small models run fastest single-threaded; several OpenMP threads on 2 shared cores thrash."""
    torch.set_num_threads(1)


@pytest.fixture
def tiny_lenet():
    """A DLG LeNet on 1×12×12 inputs with U(−0.5, 0.5) weights (seed 0), 10 classes."""
    model = LeNet(num_classes=10, in_channels=1, image_size=12)
    return init_uniform_(model, 0.5, make_generator(0))


def load_script(name: str, module_name: str | None = None):
    """``scripts/<name>.py`` imported as a module (scripts are not a package), under ``module_name``
    (default: the script's name)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(module_name or name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
