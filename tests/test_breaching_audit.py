"""The breaching audit's summary (gitutor.chapters.stepwise_gradinversion.setting_study.audit) on a synthetic record."""
import pytest

from gitutor.chapters.stepwise_gradinversion.setting_study.audit import audit_runs, audit_table


def _run(method, implementation, batch, psnr, ssim, batch_size=1):
    return {"key": [method, implementation, batch_size, batch, 1000], "PSNR": psnr, "SSIM": ssim,
            "seconds": 100.0, "curve": [[0, 6.0, 0.0], [1000, psnr, ssim]]}


def test_audit_table_has_intervals_and_paired_differences():
    ssim = {"ours": [0.5, 0.6, 0.7], "breaching": [0.4, 0.45, 0.65]}
    runs = [_run("Inverting Gradients", impl, b, 20.0 + b, s) for impl in ("breaching", "ours")
            for b, s in enumerate(ssim[impl])]
    runs.append(_run("GradInversion", "breaching", 0, 10.0, 0.1, batch_size=4))  # ours lacks it
    table = audit_table({"runs": runs, "provenance": []})
    lines = table.splitlines()
    assert lines[0].startswith("| method | B | iterations | implementation | batches | PSNR (dB) | SSIM")
    ig = [line for line in lines if "Inverting Gradients" in line]
    assert "| ours |" in ig[0] and "| breaching |" in ig[1]  # ours first
    assert "0.600 [0.352, 0.848]" in ig[0]  # mean ± t_{0.975,2} · 0.1 / √3
    assert "21.00 [18.52, 23.48]" in ig[0]
    assert "-0.100 [-0.224, 0.024]" in ig[1]  # paired differences −0.1, −0.15, −0.05
    only = [line for line in lines if "GradInversion" in line][0]
    assert "(n = 1, no interval)" in only and "| — |" in only


def test_audit_refuses_malformed_records():
    with pytest.raises(ValueError, match="runs"):
        audit_runs({"provenance": []})
    with pytest.raises(ValueError, match="key"):
        audit_runs({"runs": [{"key": ["IG", "ours", 1], "PSNR": 1.0, "SSIM": 0.1, "seconds": 1.0}]})
    with pytest.raises(ValueError, match="no runs"):
        audit_table({"runs": []})
