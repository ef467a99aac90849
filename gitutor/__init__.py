"""gitutor — the helper package behind the gradient inversion tutorial book.

The layers, each importing only those to its left (``tests/test_layers.py``)::

    data → models → federated → labels / attacks → metrics / stats → results → chapters → notebooks

``federated`` holds the client side (updates, defenses, the threat-model ``Case``); ``labels`` and
``attacks`` the papers' algorithms; ``metrics`` every score (:func:`gitutor.metrics.score_batch`),
``stats`` intervals and paired differences; ``results`` the paper-vs-run records and verdicts; ``viz``
and ``tables`` figures and Markdown tables. ``chapters/<chapter>/`` is one package per notebook (its
profile, experiments, report and figures, :mod:`gitutor.chapters`); a new chapter's code goes there.
The notebooks in ``notebooks/`` explain and call them: data through :func:`gitutor.data.load`,
settings through :func:`get_profile`.
"""

from gitutor import results
from gitutor.chapters import get_profile
from gitutor.seeding import make_generator, resolve_device, seed_everything

__all__ = [
    "get_profile",
    "results",
    "make_generator",
    "resolve_device",
    "seed_everything",
]
__version__ = "0.1.0"
