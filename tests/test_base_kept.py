"""A release interrupted after its draw keeps the noisy measurements on the exception (mmopt._base.kept).

Before, a Ctrl-C during the reconstruction of a Python API release lost them (the ledger kept the spend; the
command line holds signals, the library does not), so a user released again and spent the budget twice."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import mmopt
from mmopt import Accountant, Privacy, strategy, workload
from mmopt._base.kept import Drawn
from mmopt.records import Attribute, Domain, release_marginals
from mmopt.records import mechanism as rm

pytest.importorskip("opendp")

W16, H16 = workload.prefix(16), strategy.hierarchical(16)
X16 = np.arange(16, dtype=float)


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def _check(exc, m: int, noise: str) -> np.ndarray:
    (drawn,) = exc.noisy_measurements  # one draw, kept once even through nested releases
    assert isinstance(drawn, Drawn) and drawn.noise == noise and drawn.noise_scale > 0
    assert drawn.y.shape == (m,) and np.all(np.isfinite(drawn.y))
    assert any("noisy_measurements" in note and "budget is spent" in note for note in exc.__notes__)
    return drawn.y


@pytest.mark.parametrize("privacy", [Privacy(1.0), Privacy(1.0, 1e-6)])
def test_release_interrupted_in_reconstruction_keeps_y(monkeypatch, privacy):
    import mmopt.mechanism as mech
    monkeypatch.setattr(mech._recon, "estimate", _interrupt)
    with pytest.raises(KeyboardInterrupt) as caught:
        mmopt.release(W16, H16, X16, privacy)
    y = _check(caught.value, H16.matrix.shape[0], privacy.noise)
    # what was drawn is A x plus noise of the recorded scale (not the exact answers; not another vector)
    drawn = caught.value.noisy_measurements[0]
    assert not np.allclose(y, H16.matrix @ X16)
    assert np.abs(y - H16.matrix @ X16).max() < 60 * drawn.noise_scale


def test_accountant_release_keeps_one_copy_and_the_spend(monkeypatch, tmp_path):
    import mmopt.mechanism as mech
    monkeypatch.setattr(mech._recon, "estimate", _interrupt)
    path = tmp_path / "ledger.json"
    acc = Accountant(Privacy(1.0), path=path)
    with pytest.raises(KeyboardInterrupt) as caught:
        acc.release(W16, H16, X16, Privacy(0.5), label="interrupted")
    _check(caught.value, H16.matrix.shape[0], "laplace")
    assert [s["status"] for s in json.loads(path.read_text())["spends"]] == ["pending"]  # counted in full


def test_failure_before_the_draw_carries_nothing(monkeypatch):
    import mmopt._base.opendp as od
    monkeypatch.setattr(od, "calibrate", _interrupt)
    with pytest.raises(KeyboardInterrupt) as caught:
        mmopt.release(W16, H16, X16, Privacy(1.0))
    assert not hasattr(caught.value, "noisy_measurements")


def test_records_release_interrupted_after_the_draw(monkeypatch):
    domain = Domain((Attribute("a", categories=("x", "y")), Attribute("b", categories=(0, 1, 2))))
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.choice(["x", "y"], 50), "b": rng.integers(0, 3, 50)})
    monkeypatch.setattr(rm, "assemble", _interrupt)
    with pytest.raises(KeyboardInterrupt) as caught:
        release_marginals(df, domain, 1, Privacy(1.0, 1e-6))
    assert caught.value.noisy_measurements[0].caller == "release_marginals"
    assert caught.value.noisy_measurements[0].y.size >= 5  # the two 1-way marginals' 5 cells, or their residuals
