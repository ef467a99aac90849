"""The book's controls (gitutor.controls) and paired comparisons (gitutor.paired)."""
import math

import pytest
import torch

from gitutor.controls import (RECOGNISABLE_PSNR, batch_controls, check_threshold, control_images,
                              control_scores, start_images)
from gitutor.paired import compare_paired, oriented, paired_difference
from gitutor.stats import NOT_RESOLVED


def test_controls_know_only_what_they_say():
    grey = torch.full((2, 3, 8, 8), 0.3)
    assert all(torch.allclose(found, grey) for found in control_images(grey).values())
    x = torch.rand(3, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    found = control_images(x)
    assert list(found) == ["mean colour", "4×4 thumbnail", "batch mean", "different photograph"]
    assert torch.equal(found["different photograph"][1], x[0])
    assert torch.allclose(found["batch mean"][2], x.mean(0))
    assert torch.allclose(found["mean colour"][0, :, 3, 5], x[0].mean(dim=(1, 2)))
    assert list(control_images(x[:1])) == ["mean colour", "4×4 thumbnail"]  # N = 1: no batch controls
    with pytest.raises(ValueError, match="images"):
        control_images(torch.rand(3, 16, 16))
    with pytest.raises(ValueError, match="thumbnail"):
        control_images(x, thumbnail=16)


def test_check_threshold_refuses_a_threshold_a_control_reaches():
    x = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    scores = control_scores(x)
    assert check_threshold(scores) == max(float(v.max()) for v in scores.values()) < RECOGNISABLE_PSNR
    flat = torch.full((2, 3, 16, 16), 0.5)
    flat[1] = 0.52  # a near-flat image: its mean colour is almost exact
    with pytest.raises(ValueError, match="mean colour"):
        check_threshold(control_scores(flat))


def test_paired_difference_sees_what_overlapping_intervals_hide():
    hard_and_easy = [0.1, 0.5, 0.9, 0.3]
    a = [v + 0.02 for v in hard_and_easy]
    assert compare_paired(a, hard_and_easy, ("stepwise", "IG")) == "stepwise > IG"
    assert compare_paired(hard_and_easy, a) == "A < B"
    d = paired_difference(a, hard_and_easy)
    assert d.n == 4 and math.isclose(d.mean, 0.02) and d.high - d.low < 1e-12  # equal differences
    assert compare_paired([1.0, 0.0], [0.0, 1.0]) == NOT_RESOLVED
    assert compare_paired([1.0], [0.0]) == NOT_RESOLVED  # one pair: no interval, no claim
    with pytest.raises(ValueError, match="equal-length"):
        paired_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        paired_difference([float("nan")], [1.0])


def test_paired_ordering_reads_each_neighbour_pair():
    from gitutor.paired import paired_ordering

    base = [0.1, 0.5, 0.9, 0.3]
    results = {"S": [v + 0.2 for v in base], "G": [v + 0.1 for v in base], "I": base}
    assert paired_ordering(results, ["S", "G", "I"])["outcome"] == "consistent"
    assert paired_ordering(results, ["G", "S", "I"])["outcome"] == "refuted"
    noisy = {**results, "I": [0.3, 0.4, 1.1, 0.2]}
    found = paired_ordering(noisy, ["S", "G", "I"])
    assert found["outcome"] == "not resolved" and found["pairs"]["S > G"] == "S > G"
    with pytest.raises(ValueError, match="expected"):
        paired_ordering(results, ["S", "X"])


def test_a_margin_keeps_tiny_resolved_differences_from_being_called_an_ordering():
    a, b = [10.0, 11.0, 12.0, 13.0], [9.9, 10.9, 11.9, 12.9]
    assert compare_paired(a, b) == "A > B"
    assert compare_paired(a, b, margin=0.5) == NOT_RESOLVED
    assert compare_paired([v + 1 for v in a], a, margin=0.5) == "A > B"
    with pytest.raises(ValueError, match="margin"):
        compare_paired(a, b, margin=-1.0)


def test_start_images_are_the_starts_the_controls_score():
    """The paper's start is z·std + mean of one seeded N(0, 1) draw (clipped), the book's the same
    draw clamped in pixels; the same seed gives the same starts, and batch_controls scores them."""
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.2, 0.2)
    starts = start_images(x, mean, std, seed=3)
    z = torch.randn(x.shape, generator=torch.Generator().manual_seed(3))
    paper = (z * torch.tensor(std).view(1, 3, 1, 1) + torch.tensor(mean).view(1, 3, 1, 1)).clamp(0, 1)
    assert torch.equal(starts["noise N(0, 1), normalised units"], paper)
    assert torch.equal(starts["noise clamp(N(0, 1), 0, 1), pixels"], z.clamp(0, 1))
    assert not torch.equal(start_images(x, mean, std, seed=4)["noise clamp(N(0, 1), 0, 1), pixels"], z.clamp(0, 1))
    scores = batch_controls([x], mean, std, seed=3)
    from gitutor.metrics import psnr
    assert scores["noise N(0, 1), normalised units"]["PSNR"][0] == pytest.approx(psnr(paper, x).mean().item())
    with pytest.raises(ValueError, match="mean and std need 3 values"):
        start_images(x, (0.5,), (0.2,), seed=0)


def test_oriented_makes_higher_better_for_every_metric():
    assert oriented("PSNR", [1, 2]) == [1.0, 2.0]
    assert oriented("LPIPS", [0.2, 0.5]) == [-0.2, -0.5]
    # lower LPIPS for A reads "A > B" once oriented
    assert compare_paired(oriented("LPIPS", [0.1, 0.2, 0.15]), oriented("LPIPS", [0.5, 0.6, 0.55])) == "A > B"
