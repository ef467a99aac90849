"""DLG on 32×32 photographs with the DLG LeNet (U(−0.5, 0.5) weights), 300 L-BFGS steps, per seed.

Measures PSNR and label recovery for several seeds, with the label unknown (DLG) and given (iDLG
setting), and the wall time per attack. Each seed draws its own model, image and dummy init.

    python benchmarks/dlg_seeds.py --seeds 0 1 2 3 --iterations 300
"""
import argparse
import time

import torch

import gitutor
from gitutor.attacks import dlg
from gitutor.data import natural_images
from gitutor.federated import client_gradients
from gitutor.metrics import psnr
from gitutor.models import LeNet, init_uniform_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("seed  label-unknown PSNR (dB)  label ok  label-given PSNR (dB)  seconds/attack")
    for seed in args.seeds:
        model = init_uniform_(LeNet(num_classes=100), 0.5, gitutor.make_generator(seed))
        x = natural_images(1, size=32, seed=seed, pool="target")
        y = torch.randint(100, (1,), generator=gitutor.make_generator(seed))
        grads = client_gradients(model, x, y)
        start = time.perf_counter()
        unknown = dlg(model, grads, x.shape, 100, iterations=args.iterations, seed=seed)
        seconds = time.perf_counter() - start
        given = dlg(model, grads, x.shape, 100, labels=y, iterations=args.iterations, seed=seed)
        print(f"{seed:4d}  {float(psnr(unknown.images, x)[0]):23.2f}  {str(int(unknown.labels[0]) == int(y[0])):8s}"
              f"  {float(psnr(given.images, x)[0]):21.2f}  {seconds:14.1f}", flush=True)


if __name__ == "__main__":
    main()
