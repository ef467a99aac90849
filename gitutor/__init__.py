"""gitutor — the helper package behind the gradient inversion tutorial book.

The algorithms live in the subpackages (``attacks``, ``labels``, ``federated``, ``models``); the
notebooks in ``notebooks/`` explain and call them.
"""
from gitutor import results
from gitutor.profiles import get_profile
from gitutor.seeding import make_generator, resolve_device, seed_everything

__all__ = ["get_profile", "results", "make_generator", "resolve_device", "seed_everything"]
__version__ = "0.1.0"
