"""gitutor.stats: mean and 95 % interval over trials, and comparisons that can say "not resolved"."""
import math

import pytest
from scipy import stats as scipy_stats

from gitutor.budgets import budget_for
from gitutor.stats import (BOOTSTRAP_MIN_N, BOUNDS, NOT_RESOLVED, Interval, compare, format_interval,
                           interval, interval_table, ordering)


def test_a_small_sample_gets_the_student_t_interval():
    values = [10.0, 12.0, 11.0, 13.0]
    summary = interval(values)
    half = scipy_stats.t.ppf(0.975, 3) * scipy_stats.tstd(values) / 2
    assert summary.mean == pytest.approx(11.5)
    assert (summary.low, summary.high) == pytest.approx((11.5 - half, 11.5 + half))
    assert summary.n == 4 and format_interval(summary) == f"11.50 [{11.5 - half:.2f}, {11.5 + half:.2f}] (n = 4)"


def test_one_trial_has_no_interval_and_claims_nothing():
    single = interval([5.0])
    assert math.isinf(single.low) and math.isinf(single.high)
    assert compare([5.0], [1.0]) == NOT_RESOLVED
    assert single.as_dict() == {"mean": 5.0, "low": "-inf", "high": "inf", "n": 1}


def test_compare_claims_only_separated_intervals():
    high, low = [15.0, 15.2, 14.9, 15.1], [12.0, 12.1, 11.9, 12.2]
    assert compare(high, low, ("stepwise", "IG")) == "stepwise > IG"
    assert compare(low, high, ("IG", "stepwise")) == "IG < stepwise"
    noisy = [10.0, 16.0, 12.0, 15.0]  # mean 13.25 above low's mean, but its interval overlaps
    assert compare(noisy, low) == NOT_RESOLVED


def test_ordering_needs_every_neighbour_separated():
    a, b, c = [3.0, 3.1, 2.9], [2.0, 2.1, 1.9], [1.0, 1.1, 0.9]
    assert ordering({"B": b, "A": a, "C": c}) == "A > B > C"
    assert ordering({"A": a, "B": b, "C": [1.5, 2.5, 2.0]}) == NOT_RESOLVED
    with pytest.raises(ValueError, match="two"):
        ordering({"A": a})


def test_bad_values_raise():
    with pytest.raises(ValueError, match="empty"):
        interval([])
    with pytest.raises(ValueError, match="NaN"):
        interval([1.0, float("nan")])
    with pytest.raises(TypeError, match="real"):
        interval(["a", "b"])
    with pytest.raises(ValueError, match="confidence"):
        interval([1.0, 2.0], confidence=1.5)


def test_budget_for_inverts_a_log_linear_trend():
    budgets = [10, 100, 1000]
    means = [0.1 + 0.05 * math.log(b) for b in budgets]
    assert budget_for(budgets, means, 0.1 + 0.05 * math.log(5000)) == pytest.approx(5000)
    assert budget_for(budgets, [0.3, 0.2, 0.1], 0.5) is None
    assert budget_for(budgets, means, 0.1 + 0.05 * math.log(5e6)) is None  # beyond 1000 × the largest budget
    with pytest.raises(ValueError, match="budgets"):
        budget_for([10], [0.1], 0.3)


def test_interval_table_renders_rows_and_extra_columns():
    table = interval_table({"IG": {"PSNR": interval([1.0, 2.0, 3.0]), "LPIPS": None}}, {"IG": ["11.99"]}, ["paper"])
    assert table.splitlines()[0] == "|  | PSNR | LPIPS | paper |"
    assert "| IG | 2.00 [" in table and table.endswith("| n/a | 11.99 |")


def test_success_interval_is_wilson_inside_the_unit_interval():
    from gitutor.stats import success_interval
    all_ok = success_interval([True] * 8)
    assert all_ok.mean == 1.0 and all_ok.high == 1.0 and 0.6 < all_ok.low < 0.7  # Wilson 8/8: [0.676, 1]
    assert success_interval([True]).n == 1 and not success_interval([True]).has_interval  # no interval
    for n in range(2, 40):  # 0 of n: the lower bound is exactly 0, never a rounding error above the mean
        none = success_interval([False] * n)
        assert none.low == 0.0 <= none.mean <= none.high
    half = success_interval([1, 0, 1, 0])
    assert half.mean == 0.5 and half.low > 0 and half.high < 1 and half.n == 4
    for bad in ([], [0.5, 1], [2]):
        with pytest.raises(ValueError, match="outcomes"):
            success_interval(bad)


def test_no_interval_leaves_its_quantitys_bounds():
    # the cases: Student-t with n = 3-5 gave SSIM [-0.31, 0.66]-like spans past -1 / below 0
    ssim = interval([-0.9, 0.95, -0.95], bounds=BOUNDS["SSIM"])
    assert -1.0 <= ssim.low <= ssim.mean <= ssim.high <= 1.0 and ssim.low == -1.0 and ssim.high == 1.0
    psnr = interval([0.5, 27.0, 1.0, 2.0], bounds=BOUNDS["PSNR"])
    assert psnr.low == 0.0 and psnr.high > 20  # the t interval's lower end (−10 dB) is cut at 0 dB
    mse = interval([0.0001, 0.137, 0.002], bounds=BOUNDS["MSE"])
    assert mse.low == 0.0 < mse.high
    rate = interval([1.0, 1.0, 0.9], bounds=BOUNDS["fraction"])
    assert rate.high == 1.0 and rate.low < 1.0
    unbounded = interval([0.5, 27.0, 1.0, 2.0])  # the same numbers without bounds go negative
    assert unbounded.low < 0
    with pytest.raises(ValueError, match="bounds"):
        interval([0.5, 1.2], bounds=BOUNDS["SSIM"])  # an SSIM of 1.2 is a bug upstream
    with pytest.raises(ValueError, match="bounds"):
        Interval(0.5, -1.2, 1.0, 3, BOUNDS["SSIM"])
    with pytest.raises(ValueError, match="low < high"):
        interval([1.0, 2.0], bounds=(1.0, 1.0))
    with pytest.raises(TypeError, match="pair"):
        interval([1.0, 2.0], bounds=0.0)


def test_a_large_sample_gets_a_seeded_bounded_bootstrap_interval():
    values = [0.0] * (BOOTSTRAP_MIN_N - 2) + [0.5, 0.9]  # skewed, at the lower bound: t would go below 0
    boot = interval(values, bounds=BOUNDS["MSE"])
    assert boot.n == BOOTSTRAP_MIN_N and boot.low >= 0.0 and boot.low <= boot.mean <= boot.high
    assert boot == interval(values, bounds=BOUNDS["MSE"])  # seeded: the same values, the same interval
    half = scipy_stats.t.ppf(0.975, len(values) - 1) * scipy_stats.tstd(values) / math.sqrt(len(values))
    assert boot.mean - half < 0 and boot.high != pytest.approx(boot.mean + half)  # not the t interval
    normal = interval([float(scipy_stats.norm.ppf((0.5 + k) / 200, loc=5.0)) for k in range(200)])
    assert normal.n == 200 and 4.8 < normal.low < 5.0 < normal.high < 5.2
    same = interval([0.3] * 25, bounds=BOUNDS["fraction"])
    assert (same.low, same.high) == (0.3, 0.3)


def test_one_trial_is_reported_as_no_interval():
    single = interval([0.4], bounds=BOUNDS["fraction"])
    assert not single.has_interval and format_interval(single) == "0.40 (n = 1, no interval)"
    assert compare(single, interval([0.1, 0.11, 0.12])) == NOT_RESOLVED


def test_budget_for_refuses_to_extrapolate_from_wide_intervals():
    budgets = [100, 1000]
    means = [0.1 + 0.05 * math.log(b) for b in budgets]
    target = 0.1 + 0.05 * math.log(5000)
    narrow = [Interval(m, m - 0.005, m + 0.005, 5) for m in means]
    assert budget_for(budgets, narrow, target) == pytest.approx(5000)
    wide = [Interval(m, m - 0.3, m + 0.3, 5) for m in means]  # SSIM-like spans of 0.6
    assert budget_for(budgets, [w.mean for w in wide], target) == pytest.approx(5000)  # numbers: taken as exact
    assert budget_for(budgets, wide, target) is None
    single = [Interval(m, -math.inf, math.inf, 1) for m in means]
    assert budget_for(budgets, single, target) is None
    with pytest.raises(TypeError, match="mix"):
        budget_for(budgets, [narrow[0], means[1]], target)
