"""gitutor — the helper package behind the gradient inversion tutorial book.

The algorithms live in the subpackages, imported in one direction: ``data`` → ``models`` →
``federated`` (client updates, defenses, the threat-model ``Case``) → ``labels`` → ``attacks``, with
``metrics`` (every score, :func:`gitutor.metrics.score_batch`), ``viz`` and ``results`` beside them.
The notebooks in ``notebooks/`` explain and call them: data through :func:`gitutor.data.load`,
settings through :func:`get_profile`.
"""
from gitutor import results
from gitutor.profiles import get_profile
from gitutor.seeding import make_generator, resolve_device, seed_everything

__all__ = ["get_profile", "results", "make_generator", "resolve_device", "seed_everything"]
__version__ = "0.1.0"
