"""Dense (LAPACK) and sparse (CSR + SuperLU) Jacobian paths give the same
kinematics; a driven chain of N links matches its closed-form solution."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.system import compiled_available


def driven_chain(n_links: int, length: float = 1.0) -> Model:
    """Chain of links pinned end to end, link 0 pinned to ground; the absolute angle
    of link 0 and every relative angle are driven: theta_k(t) = 0.3 sin(t + k)."""
    m = Model(f"chain{n_links}")
    phi = 0.0
    x = y = 0.0
    for k in range(n_links):
        phi += 0.3 * np.sin(k)
        m.add_body(f"L{k}", position=(x + 0.5 * length * np.cos(phi),
                                      y + 0.5 * length * np.sin(phi)), angle=phi)
        x += length * np.cos(phi)
        y += length * np.sin(phi)
        m.add_joint("revolute", f"J{k}", body_i="ground" if k == 0 else f"L{k - 1}",
                    body_j=f"L{k}", point_i=(0, 0) if k == 0 else (0.5 * length, 0),
                    point_j=(-0.5 * length, 0))
        fn = f"0.3*sin(t + {k})"
        if k == 0:
            m.add_driver("absolute_driver", "D0", body="L0", coordinate="phi", function=fn)
        else:
            m.add_driver("relative_driver", f"D{k}", body_i=f"L{k}", body_j=f"L{k - 1}",
                         function=fn)
    return m


def chain_tip(n_links, t, length=1.0):
    k = np.arange(n_links)
    phi = np.cumsum(0.3 * np.sin(t + k))
    w = np.cumsum(0.3 * np.cos(t + k))
    return (np.array([np.sum(length * np.cos(phi)), np.sum(length * np.sin(phi))]),
            np.array([np.sum(-length * w * np.sin(phi)), np.sum(length * w * np.cos(phi))]))


@pytest.mark.parametrize("model_file", ["fourbar_kap.yaml", "slider_crank.yaml"])
def test_dense_and_sparse_paths_agree(examples, backend, model_file):
    model = Model.from_file(examples / model_file)
    a = mbcore.run(model, kernels=backend, jacobian="dense")
    b = mbcore.run(model, kernels=backend, jacobian="sparse")
    assert not b.system.dense and a.system.dense
    for ch in ("q", "qd", "qdd"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=1e-11, atol=1e-10 * np.abs(a[ch]).max())


def test_long_chain_is_sparse_and_matches_closed_form(backend):
    n = 110                                    # 330 coordinates > dense limit
    model = driven_chain(n)
    model.add_point("tip", f"L{n - 1}", (0.5, 0.0))
    res = mbcore.run(model, kernels=backend, settings={"t_end": 0.5, "output_step": 0.1})
    assert not res.system.dense and res.system.n == 3 * n
    # each joint meets the Newton test 1e-10 (1 + |q|) (|q| <= 103); the tip adds the n
    # joints' errors: n 1e-10 (1 + |q|) = 1.1e-6 (observed 1.0e-7); 10x that bound.
    # Velocities: one linear solve (observed 1.8e-14).
    pos_tol = 10 * n * 1e-10 * (1 + np.abs(res["q"]).max())
    for k, t in enumerate(res.t):
        pos, vel = chain_tip(n, t)
        np.testing.assert_allclose([res["points/tip.x"][k], res["points/tip.y"][k]], pos,
                                   rtol=0, atol=pos_tol)
        np.testing.assert_allclose([res["points/tip.xd"][k], res["points/tip.yd"][k]], vel,
                                   rtol=0, atol=1e-8)


@pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")
def test_backends_give_identical_trajectories(examples):
    model = Model.from_file(examples / "fourbar_kap.yaml")
    a = mbcore.run(model, kernels="compiled")
    b = mbcore.run(model, kernels="numpy")
    for ch in ("q", "qd", "qdd", "points"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=1e-12, atol=1e-12 * np.abs(a[ch]).max())


def test_runner_uses_the_analysis_dense_limit():
    """jacobian: auto picks dense/sparse by the analysis' measured crossover: a
    60-coordinate system runs its kinematics dense (compiled stepper) and its
    dynamics sparse (sparse Schur complement)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import chain
    import mbcore
    m = chain(20)                                  # n = 60
    dyn = mbcore.run(m, settings={"analysis": "dynamic", "t_end": 0.02, "output_step": 0.01})
    assert not dyn.system.dense
    m.add_driver("absolute_driver", "turn", body="L0", coordinate="phi",
                 function={"polynomial": [0.0, 1.0]})
    for k in range(1, 20):
        m.add_driver("relative_driver", f"hold{k}", body_i=f"L{k - 1}", body_j=f"L{k}",
                     coordinate="phi", function=0.0)
    m.settings = {"analysis": "kinematic", "t_end": 0.02, "output_step": 0.01}
    kin = mbcore.run(m)
    assert kin.system.dense and kin.status == "finished"
