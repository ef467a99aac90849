"""The packaged ImageNet EfficientNet-Lite0 (gitutor.models.pretrained): accuracy, architecture check, attack cost.

Measures, offline, on one thread:

1. top-1 / top-5 on foolbox's 20 ImageNet photographs (resize 256, centre crop 224), with the weights' own
   standardisation (TensorFlow EfficientNet-Lite: (x − 127) / 128 on 0–255, what :func:`pretrained` does) and
   with torchvision's ImageNet mean/std instead;
2. max |Δlogit| between timm's ``tf_efficientnet_lite0`` with the weights and the weights' companion code
   (``efficientnet-lite-pytorch``) at 224, 128 and 64 px;
3. CPU seconds of one gradient-inversion iteration — forward, the parameter gradient with ``create_graph``
   and the backward of a cosine gradient-matching loss to the dummy images (a "double backward") — at 224,
   128 and 64 px for B = 1 and B = 4 (train-mode BatchNorm, as a client computes its update), the shortest
   of ``--repeats``::

    python3 benchmarks/efficientnet_lite0.py [--repeats 3] [--out record.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gitutor.assets import asset_path  # noqa: E402
from gitutor.data import load  # noqa: E402
from gitutor.models import pretrained  # noqa: E402


def accuracy(model, images, labels) -> tuple[int, int]:
    with torch.no_grad():
        logits = model(images)
    return (int((logits.argmax(1) == labels).sum()),
            int((logits.topk(5, dim=1).indices == labels[:, None]).any(1).sum()))


def max_logit_difference(model, images) -> dict[int, float]:
    from efficientnet_lite_pytorch import EfficientNet

    reference = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=str(asset_path("efficientnet_lite0")))
    reference.eval()
    out = {}
    for size in (224, 128, 64):
        x = torch.nn.functional.interpolate(images, size=size, mode="bilinear", antialias=True).clamp(0, 1)
        with torch.no_grad():
            out[size] = float((model(x) - reference((x - model.mean) / model.std)).abs().max())
    return out


def iteration_seconds(model, size: int, batch: int, repeats: int) -> float:
    """CPU seconds of one cosine gradient-matching step (forward + create_graph gradient + backward to x)."""
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(0)
    truth = torch.rand(batch, 3, size, size, generator=generator)
    labels = torch.randint(1000, (batch,), generator=generator)
    loss = torch.nn.functional.cross_entropy(model(truth), labels)
    target = [g.detach() for g in torch.autograd.grad(loss, params)]
    dummy = torch.rand(batch, 3, size, size, generator=generator, requires_grad=True)
    times = []
    for _ in range(repeats):
        start = time.process_time()
        loss = torch.nn.functional.cross_entropy(model(dummy), labels)
        grads = torch.autograd.grad(loss, params, create_graph=True)
        dot = sum((g * t).sum() for g, t in zip(grads, target))
        norm = torch.sqrt(sum((g * g).sum() for g in grads)) * torch.sqrt(sum((t * t).sum() for t in target))
        (1 - dot / norm).backward()
        dummy.grad = None
        times.append(time.process_time() - start)
    model.eval()
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = pretrained("efficientnet_lite0")
    images, labels = load("imagenet")
    bare = pretrained(normalize=False)
    imagenet_mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    imagenet_std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    record = {"accuracy_lite_standardisation": accuracy(model, images, labels),
              "accuracy_imagenet_mean_std": accuracy(lambda x: bare((x - imagenet_mean) / imagenet_std), images, labels)}
    try:
        record["max_abs_logit_difference_vs_companion"] = max_logit_difference(model, images[:4])
    except ModuleNotFoundError as error:
        record["max_abs_logit_difference_vs_companion"] = f"not measured: {error}"
    record["seconds_per_iteration_one_thread"] = {
        f"{size}px_B{batch}": round(iteration_seconds(model, size, batch, args.repeats), 3)
        for size in (224, 128, 64) for batch in (1, 4)}
    record["provenance"] = {"torch": torch.__version__, "machine": platform.processor() or platform.machine()}
    text = json.dumps(record, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
