"""Kinematic, kinetostatic and static analysis in joint coordinates (the
joint-coordinate issue, deliverables 4-5; spec/algorithms.md §4.7, §5.5): the same
positions, velocities, accelerations, multipliers and equilibria as the Cartesian
analyses on the shipped examples (planar and spatial, trees and loops)."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model

from conftest import EXAMPLES

KINEMATIC = ["chebyshev_lambda", "crank_rocker", "fourbar_kap", "quick_return_1",
             "slider_crank", "geneva_wheel", "pantograph", "spatial_slider_crank",
             "spatial_rssr", "spatial_bennett", "spatial_cardan_shaft",
             "peaucellier_inversion", "quick_return_3"]


def both(name, **st):
    m = Model.from_file(EXAMPLES / f"{name}.yaml")
    st = {"tolerance": 1e-12, **st}
    return (mbcore.run(m, settings=st),
            mbcore.run(m, settings={**st, "coordinates": "joint"}))


@pytest.mark.parametrize("name", KINEMATIC)
def test_kinematic_examples_in_joint_coordinates(name):
    """Newton on the drivers and cut-joint rows in the tree's coordinates; the
    spatial RSSR crank turns past pi (angle unwrapping, Euler-parameter sign
    continuity); Bennett's linkage has redundant loop equations (dropped)."""
    a, b = both(name, t_end=0.5)
    assert len(a["q"]) == len(b["q"]) > 2
    for ch, tol in (("q", 1e-9), ("qd", 1e-8), ("qdd", 1e-7)):
        scale = 1.0 + np.abs(a[ch]).max()
        np.testing.assert_allclose(b[ch], a[ch], atol=tol * scale, err_msg=ch)
    assert b.stats["coordinates"] == "joint"


@pytest.mark.parametrize("name", ["slider_crank_springs_002", "spatial_boom_actuators"])
def test_kinetostatic_examples_in_joint_coordinates(name):
    """Driver efforts from D^T lam* = B^T (M vdot - F), joint reactions from the
    tree: the same as the Cartesian transposed-Jacobian solve."""
    m = Model.from_file(EXAMPLES / f"{name}.yaml")
    st = {"analysis": "kinetostatic", "tolerance": 1e-12, "t_end": 0.5}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "coordinates": "joint"})
    R = np.abs(a["reactions"]).max()
    np.testing.assert_allclose(b["reactions"], a["reactions"], atol=1e-8 * R)
    np.testing.assert_allclose(b["lam"], a["lam"], atol=1e-8 * np.abs(a["lam"]).max())


def test_under_driven_tree_is_a_named_error():
    m = Model.from_file(EXAMPLES / "fourbar_kap.yaml")
    m.elements["drivers"].clear()
    with pytest.raises(mbcore.errors.MbcoreError, match="independent"):
        mbcore.run(m, settings={"coordinates": "joint"})


@pytest.mark.parametrize("name", ["dump_truck_dynamic", "nfourbar_10", "platform",
                                  "parallelogram_singular"])
def test_more_dynamic_examples_agree_with_cartesian(name):
    """The dynamic examples not covered elsewhere (trees and loops through cut joints;
    the dump truck assembled first: its file starts, as DAP does, from the book's
    4-decimal coordinates, which are not on the tree — a named error)."""
    m = Model.from_file(EXAMPLES / f"{name}.yaml")
    st = {"t_end": 0.3, "output_step": 0.06, "rtol": 1e-11, "atol": 1e-12,
          "assemble": True, "integrator": "dopri5"}
    a = mbcore.run(m, settings={**st, "formulation": "di"})
    b = mbcore.run(m, settings={**st, "formulation": "joint_coordinates"})
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    R = np.abs(a["reactions"]).max()
    np.testing.assert_allclose(b["reactions"], a["reactions"], atol=1e-7 * R)
    if name == "dump_truck_dynamic":
        with pytest.raises(mbcore.errors.AnalysisError, match="not on the tree"):
            mbcore.run(m, settings={"t_end": 0.1, "formulation": "joint_coordinates"})
