"""Thin rods: spatial bodies with zero inertia about one axis (the IFToMM benchmark
rods).  In the transformed columns of mbcore.system.mass the mass matrix is diagonal
with a zero on the rod's axis; the augmented (KKT) solve is regular exactly where the
joints fix every rod's spin (M positive definite on the constraints' null space), and
a rod whose spin nothing fixes is refused by name."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import AnalysisError, ModelError
from mbcore.model.model import inertia_tensor


def slider_crank(examples, axial, spherical_end=False):
    """The spatial slider-crank with its coupler a thin rod: spherical joint at the
    crank, universal at the slider (its axis on the coupler perpendicular to the rod:
    the spin is fixed), or spherical at both ends (the spin is free)."""
    d = Model.from_file(examples / "spatial_slider_crank_dynamic.yaml").to_dict()
    d["bodies"][1]["inertia"] = [axial, 0.0135, 0.0135]
    if spherical_end:
        j = d["joints"][2]
        j["type"] = "spherical"
        j.pop("axis_i")
        j.pop("axis_j")
    return Model.from_dict(d)


ST = {"t_end": 0.3, "output_step": 0.05, "rtol": 1e-10, "atol": 1e-12}


def test_inertia_of_a_rod_is_accepted_and_others_named():
    J = np.array(inertia_tensor([0.0, 0.0135, 0.0135], "b.inertia"))
    assert J[0, 0] == 0.0 and J[1, 1] == J[2, 2] == 0.0135
    # a rotated rod's tensor: its axial moment made exactly zero
    c, s = np.cos(0.3), np.sin(0.3)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    Jr = np.array(inertia_tensor((R @ np.diag([0.0, 2.0, 2.0]) @ R.T).tolist(), "b"))
    np.testing.assert_allclose(np.linalg.eigvalsh(Jr), [0.0, 2.0, 2.0], atol=1e-14)
    with pytest.raises(ModelError, match="other two principal moments must be equal"):
        inertia_tensor([0.0, 1.0, 2.0], "b.inertia")
    with pytest.raises(ModelError, match="zero inertia about more than one axis"):
        inertia_tensor([0.0, 0.0, 1.0], "b.inertia")
    with pytest.raises(ModelError, match="point mass \\('particle3'\\)"):
        inertia_tensor([0.0, 0.0, 0.0], "b.inertia")
    with pytest.raises(ModelError, match="positive definite"):
        inertia_tensor([-1.0, 1.0, 1.0], "b.inertia")


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "cp"])
def test_a_rod_whose_spin_is_fixed_moves_as_the_limit_of_small_axial_inertia(
        examples, formulation):
    """With zero axial inertia the motion is the limit of a small one: 1e-9 kg m^2
    changes it by ~1e-9 of the coupler's transverse inertia (observed 3.5e-10 m;
    bound 1e-7 m), with no stiffness: about the evaluations of a regular body."""
    ref = mbcore.run(slider_crank(examples, 1e-9), settings={**ST, "formulation": "di"})
    res = mbcore.run(slider_crank(examples, 0.0), settings={**ST, "formulation": formulation})
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=1e-7)
    if formulation == "di":
        assert res.stats["integrator_nfev"] <= 1.5 * ref.stats["integrator_nfev"]
        E = res["energy/balance"]            # T + V - W: the damper's and motor's work
        assert np.max(np.abs(E - E[0])) < 1e-7     # (observed ~1e-11)


def test_a_rod_whose_spin_nothing_fixes_is_refused_by_name(examples):
    with pytest.raises(AnalysisError, match="body 'coupler' has zero inertia about its "
                                            "axis \\(1, 0, 0\\) and no joint fixes its "
                                            "rotation about that axis"):
        mbcore.run(slider_crank(examples, 0.0, spherical_end=True),
                   settings={**ST, "formulation": "di"})


@pytest.mark.parametrize("formulation", ["penalty", "ggl", "stiff", "di_omega",
                                         "joint_coordinates"])
def test_formulations_that_need_the_inverse_mass_refuse_rods_by_name(examples, formulation):
    with pytest.raises(ModelError, match=f"formulation '{formulation}'.*body 'coupler' is "
                                         f"a thin rod.*use di, cs, cp or projection"):
        mbcore.run(slider_crank(examples, 0.0), settings={
            **ST, "formulation": formulation,
            **({"integrator": "bdf", "rtol": 1e-8} if formulation in ("ggl", "stiff")
               else {})})
