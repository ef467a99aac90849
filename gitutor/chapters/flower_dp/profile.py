"""Settings of notebook 08_flower_dp: the attack on a real Flower federation, against Opacus DP-SGD.

The task is face / non-face on the 200 LFW images bundled with scikit-image (25×25 grey, resized to
32×32): a test set of ``test_per_class`` + ``test_per_class`` images (50 + 50: paired accuracy
differences need many test images), the rest — faces and non-faces alternating, so the attacked
clients hold both classes and label recovery can be told from a constant guess — spread over the
clients. The network is the DLG LeNet
with tanh activations and PyTorch's default initialisation — chosen by measurement (notebook, "Which
network"): it learns the task in a few rounds and Inverting Gradients recovers a face from its
gradient in a few hundred steps on one core; a width-16/32 ResNet-18 with GroupNorm (what Opacus
needs instead of BatchNorm) returned noise at 7 s per 100 steps.

The defense study (Flower's SecAgg+, central DP with either clipping, LocalDpMod) runs the same clients
and rounds with every reply weighted once, at η = ``defense_lr``.

Three sizes. ``DECISIVE`` holds the sizes the chapter's verdicts are read at; they cost about half an
hour of CPU, more than the book build's share, so they run as the chapter's recording on Flower's
simulation engine (budget ``"recorded"``, ``make record``), and that recording speaks for the chapter.
``QUICK`` (what the book build runs, in-process: ``engine="in-process"``) is a preview with the same
code path at fewer clients, rounds, noise levels and attack steps, whose verdicts are its own. ``FULL``
runs more clients, rounds, noise levels and attack steps on the simulation engine, for a GPU.
"""

DECISIVE = {
    "torch_threads": 1,  # LeNet-sized work is fastest on one thread; same numbers anywhere
    "image_size": 32,
    "test_per_class": 50,  # server's test set: 50 faces + 50 non-faces (100 left to train)
    "engine": "in-process",  # Flower apps driven in this process (no Ray, no sockets)
    "lr": 0.05,  # clients' SGD learning rate η
    "attacked_clients": 5,  # clients whose updates the server attacks (one interval each)
    # images per client, FedSGD (one step on the whole batch; B > 1 attacked for batch_iterations)
    "batch_sizes": [1, 2, 4],
    "local_epochs": [1, 2, 5],  # FedAvg: E local steps on a client's one image
    "attack_iterations": 200,  # Inverting Gradients steps (signed Adam, lr 0.1)
    "tv_weight": 1e-2,
    # under noise the server picks λ_TV per noise level from these, in increasing order until its score
    # turns down, on its own test images sent through the same defense and rounds
    # (strongest.tuned_tv_weight): more noise, smoother images win
    "tv_candidates": [1e-2, 3e-2, 1e-1, 3e-1, 1.0, 3.0],
    "tuning_images": 2,
    "record_every": 50,
    "utility_clients": 8,  # clients holding the rest of the training faces / non-faces
    "rounds": 10,  # federated rounds of the DP sweep (utility after them)
    # σ of the sweep (0: clipping only, ε = ∞; ε ≈ 5.5e6 … 1.1 for the 10 rounds): the attack breaks
    # near where the noise's norm σC√m (m = 9 074 parameters) reaches C (σ ≈ 0.01), so the small σ
    # bracket it inside the sweep, one decade apart at most (0.01, 0.1); 1 (the decision table's) and
    # 12 show the accuracy side
    "noise_multipliers": [0.0, 0.001, 0.003, 0.01, 0.1, 1.0, 12.0],
    "max_grad_norm": 1.0,  # C, per-example clipping norm
    "delta": 1e-5,
    "accountant": "rdp",
    "handwritten_variance": 1e-2,  # chapter 01's Gaussian-noise defense (DLG §5), for comparison
    # Flower's defenses (same clients and rounds; FedSGD, every reply weighted once)
    # η of the defense study: of 0.05, 0.1, 0.2 the best final training accuracy of the undefended,
    # equally weighted federation on the clients' own images (0.2 oscillates, 0.05 learns slowly)
    "defense_lr": 0.1,
    "central_clip": 0.1,  # C of central DP, parameter units
    "central_z": 1.0,  # z: the server's noise std z·C on the clipped sum
    "local_clip": 0.01,  # LocalDpMod's C, parameter units (s = 2C)
    # LocalDpMod's noise multiplier z = σ/s (the mod's ε set from it: defenses.local_mod_epsilon); under
    # add/remove adjacency it is the Gaussian mechanism at 2z, so z = σ/2 carries DP-SGD's ε at σ
    # (defenses.matched_local_z): table_sigma / 2 must be one, the decision table's row
    "local_noise_multipliers": [0.003, 0.01, 0.1, 0.5, 1.0],
    "secagg_k": [2, 5],  # clients in the aggregate SecAgg+ leaves to the server
    "secagg_groups": 3,  # disjoint groups of k images per k (one aggregate each)
    # IG steps on the gradient of more than one image (FedSGD with B > 1, a SecAgg+ aggregate): a batch
    # flattens later than one image (SecAgg+ k = 2 on this page's groups: 200 steps 13.7 dB, 1 000 steps
    # 19.3, 2 000 steps 19.6, 4 000 steps 18.3 — scratch run, 2026-12-06)
    "batch_iterations": 1000,
    "table_sigma": 1.0,  # the DP-SGD point of the decision table
    # the strongest adversary per defense (decision table): IG restarts, multi-round mean, LTI
    "restarts": 3,  # IG starts per client, the lowest objective (matching + λ_TV·TV) kept
    "lti_hidden": 256,  # LTI's MLP hidden size (Wu et al.: 3 000)
    "lti_epochs": 40,
    "lti_lr": 2e-3,  # Adam (chapter 06's quick setting; Wu et al.: 1e-4, 200 epochs)
    "lti_copies": 4,  # noise draws per auxiliary image under a noised defense
    "progress": False,
}

#: The book build's preview: DECISIVE's code path at sizes that fit its share of the quick book (about
#: two minutes on one core). Two clients cannot decide a count out of five; the page says so and shows
#: the recording's rows beside its own.
QUICK = {
    **DECISIVE,
    "attacked_clients": 2,
    "batch_sizes": [1, 2],
    "local_epochs": [1, 5],
    "attack_iterations": 150,
    "utility_clients": 4,
    "rounds": 4,
    # 12: the smallest ε, where the page judges Ye et al.'s claim on utility (as the recording does)
    "noise_multipliers": [0.0, 0.01, 0.1, 1.0, 12.0],
    "local_noise_multipliers": [0.1, 0.5],
    "secagg_k": [2],
    "secagg_groups": 1,
    "batch_iterations": 300,
    "tv_candidates": [1e-2, 1e-1, 1.0],
    "tuning_images": 1,
    "restarts": 2,
    "lti_hidden": 128,
    "lti_epochs": 20,
    "lti_copies": 2,
}

FULL = {
    **DECISIVE,
    "torch_threads": None,
    "engine": "simulation",  # flwr.simulation.run_simulation (local Ray cluster)
    "attacked_clients": 20,
    "batch_sizes": [1, 2, 4],  # 20 clients × 4 = 80 of the 100 training images
    "local_epochs": [1, 2, 5, 10],
    "attack_iterations": 2000,
    "record_every": 250,
    "utility_clients": 16,
    "rounds": 30,
    "noise_multipliers": [0.0, 0.001, 0.002, 0.003, 0.005, 0.01, 0.1, 1.0, 4.0, 12.0],
    "local_noise_multipliers": [
        0.0005,
        0.001,
        0.002,
        0.003,
        0.005,
        0.01,
        0.1,
        0.5,
        1.0,
        4.0,
    ],
    "secagg_k": [
        2,
        5,
        10,
        20,
    ],  # (quick: 2, 5 — a batch-k attack costs k times one image's)
    "batch_iterations": 10000,
    "tv_candidates": [3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0, 3.0, 10.0],
    "tuning_images": 8,
    "restarts": 8,
    "lti_hidden": 1000,
    "lti_epochs": 200,
    "lti_lr": 1e-3,
    "lti_copies": 16,
    "progress": True,
}

BUDGETS = {
    # the decisive sizes on Flower's simulation engine (flwr.simulation.run_simulation, a local Ray
    # cluster started per federation): the chapter's recording (`make record`), too slow for the book build
    "recorded": {**DECISIVE, "engine": "simulation"},
    # `make smoke`: the profile's code path for a few attack steps and rounds
    "smoke": {
        "attacked_clients": 2,
        "batch_sizes": [1, 2],
        "local_epochs": [1, 2],
        "attack_iterations": 5,
        "record_every": 5,
        "utility_clients": 2,
        "rounds": 2,
        "noise_multipliers": [0.0, 1.0],
        "local_noise_multipliers": [0.5],
        "secagg_k": [2],
        "secagg_groups": 2,
        "batch_iterations": 5,
        "tv_candidates": [1e-2, 1e-1],
        "torch_threads": 1,
        "restarts": 2,
        "lti_hidden": 16,
        "lti_epochs": 2,
        "lti_copies": 2,
    },
}

#: What a recording at a budget is, in its page's title (scripts/record.py).
RECORDING_TITLES = {
    "recorded": "on Flower's simulation engine, at the chapter's decisive sizes"
}

#: Papermill parameters of ``make smoke`` (scripts/smoke.py).
SMOKE_PARAMETERS = {"BUDGET": "smoke"}
