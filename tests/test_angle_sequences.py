"""The twelve angle sequences (Nikravesh (1988), App. A convention: rotations about the
turning body's axes): A as the product of elementary rotations, the round trips
angles -> A -> angles and angles -> p -> angles, the singular configurations, the
angular-velocity matrices against a time derivative of A, agreement with the
book's 3-1-3 and 1-2-3 functions, the model-file form and Result.orientation."""
from __future__ import annotations

import math

import numpy as np
import pytest

import mbcore
from mbcore import Model, ModelError
from mbcore.elements import angle_sequences as AS
from mbcore.elements import rotations as R
from mbcore.elements.orientation_spec import orientation_from_spec

RNG = np.random.default_rng(7)


def _elementary(axis, a):
    c, s = math.cos(a), math.sin(a)
    if axis == 0:
        return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == 1:
        return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _angles(seq, n=100):
    a = RNG.uniform(-3.0, 3.0, (n, 3))
    if seq[0] == seq[2]:                      # proper Euler: θ2 in (0, π)
        a[:, 1] = RNG.uniform(0.05, math.pi - 0.05, n)
    else:                                     # Tait–Bryan: θ2 in (−π/2, π/2)
        a[:, 1] = RNG.uniform(-1.5, 1.5, n)
    return a


def test_twelve_distinct_sequences():
    assert len(set(AS.SEQUENCES)) == 12
    mats = {s: AS.angles_to_A([0.3, 0.5, 0.7], s) for s in AS.SEQUENCES}
    for s in AS.SEQUENCES:
        others = [t for t in AS.SEQUENCES if t != s]
        assert all(np.abs(mats[s] - mats[t]).max() > 1e-3 for t in others)


@pytest.mark.parametrize("name, axes", [("3-2-1", (2, 1, 0)), ("zyx", (2, 1, 0)),
                                        ("XYZ", (0, 1, 2)), ("131", (0, 2, 0))])
def test_sequence_names(name, axes):
    assert AS.parse_sequence(name) == axes


@pytest.mark.parametrize("bad", ["3-3-1", "xx", "1234", "", 313])
def test_bad_sequence_names(bad):
    with pytest.raises(ValueError, match="unknown angle sequence"):
        AS.parse_sequence(bad)


@pytest.mark.parametrize("seq", AS.SEQUENCES)
def test_A_is_the_product_of_body_axis_rotations(seq):
    i, j, k = (int(c) - 1 for c in seq)
    for a in _angles(seq, 5):
        ref = _elementary(i, a[0]) @ _elementary(j, a[1]) @ _elementary(k, a[2])
        # entries of size ≤ 1 from a few products (observed ≤ 4e-16): every bound
        # of 1e-13 in this file has ≥ 100× margin over what was observed (≤ 1.0e-15;
        # singular sets 3.3e-16, against the book's 3-1-3/1-2-3 ≤ 2.2e-16, the
        # Result comparisons ≤ 1e-33: angles near 0)
        # observed 0 (same products): bound 1e-13 on entries ≤ 1 (~450 eps)
        np.testing.assert_allclose(AS.angles_to_A(a, seq), ref, rtol=0, atol=1e-13)


@pytest.mark.parametrize("seq", AS.SEQUENCES)
def test_round_trips(seq):
    a = _angles(seq)
    A = AS.angles_to_A(a, seq)
    # atan2 of entries exact to a few eps: observed ≤ 9e-16 (rad); bound 1e-12 has
    # > 1000× margin, away from the singular set (θ2 ≥ 0.05 rad from it)
    # observed ≤ 4.4e-16 rad over 12 x 200 sets: bound 1e-12, > 2000x margin
    np.testing.assert_allclose(AS.A_to_angles(A, seq), a, rtol=0, atol=1e-12)
    p = AS.angles_to_p(a, seq)
    assert np.all(p[:, 0] >= 0.0)
    # observed ≤ 1.0e-15 over 12 x 200 sets: bound 2e-13, 200x margin
    np.testing.assert_allclose(R.A(p), A, rtol=0, atol=2e-13)
    # observed ≤ 3.7e-15 rad (via A(p), near-singular sets amplify): bound 1e-12, 270x
    np.testing.assert_allclose(AS.p_to_angles(p, seq), a, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seq", AS.SEQUENCES)
def test_singular_configurations_give_a_valid_decomposition(seq):
    a = _angles(seq, 20)
    a[:, 1] = 0.0 if seq[0] == seq[2] else RNG.choice([-1.0, 1.0], 20) * math.pi / 2
    A = AS.angles_to_A(a, seq)
    b = AS.A_to_angles(A, seq)
    assert np.all(b[:, 2] == 0.0)                 # the convention there: θ3 = 0
    np.testing.assert_allclose(AS.angles_to_A(b, seq), A, rtol=0, atol=1e-13)


@pytest.mark.parametrize("seq", AS.SEQUENCES)
def test_angle_rates_give_omega(seq):
    """ω̃ = Ȧ Aᵀ, Ȧ by central differences (h = 1e-6: error O(h²) ≈ 1e-12 plus
    rounding eps/h ≈ 2e-10; observed ≤ 1.3e-10); ω' = Aᵀ ω."""
    h = 1e-6
    for a in _angles(seq, 5):
        ad = RNG.normal(size=3)
        A = AS.angles_to_A(a, seq)
        Ad = (AS.angles_to_A(a + h * ad, seq) - AS.angles_to_A(a - h * ad, seq)) / (2 * h)
        W = Ad @ A.T
        w = np.array([W[2, 1], W[0, 2], W[1, 0]])
        np.testing.assert_allclose(AS.angle_rates_to_omega(a, seq) @ ad, w, rtol=0,
                                   atol=1e-8)
        np.testing.assert_allclose(AS.angle_rates_to_omega_body(a, seq) @ ad, A.T @ w,
                                   rtol=0, atol=1e-8)


def test_agrees_with_the_books_313_and_123():
    a = _angles("313")
    np.testing.assert_allclose(AS.angles_to_A(a, "313"), R.euler313_to_A(a), rtol=0,
                               atol=1e-13)
    np.testing.assert_allclose(AS.A_to_angles(R.euler313_to_A(a), "zxz"),
                               R.A_to_euler313(R.euler313_to_A(a)), rtol=0, atol=1e-13)
    np.testing.assert_allclose(AS.angle_rates_to_omega_body(a, "313"),
                               R.euler313_rates_to_omega_body(a), rtol=0, atol=1e-13)
    b = _angles("123")
    ref = R.bryant123_to_p(b)
    ref = np.where(ref[:, :1] < 0.0, -ref, ref)         # (p and −p: one orientation)
    np.testing.assert_allclose(AS.angles_to_p(b, "1-2-3"), ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(AS.angle_rates_to_omega(b, "123"),
                               R.bryant123_rates_to_omega(b), rtol=0, atol=1e-13)


def test_model_file_angles_form():
    """yaw 30°, pitch 20°, roll 10° (3-2-1) in a model file."""
    p = orientation_from_spec({"angles": [30, 20, 10], "sequence": "3-2-1", "unit": "deg"},
                              "bodies[0].orientation")
    A = (_elementary(2, math.radians(30)) @ _elementary(1, math.radians(20))
         @ _elementary(0, math.radians(10)))
    np.testing.assert_allclose(R.A(p), A, rtol=0, atol=1e-13)
    with pytest.raises(ModelError, match=r"orientation.sequence: required"):
        orientation_from_spec({"angles": [1, 2, 3], "unit": "rad"}, "b.orientation")
    with pytest.raises(ModelError, match=r"orientation.sequence: unknown angle sequence"):
        orientation_from_spec({"angles": [1, 2, 3], "sequence": "3-3-1", "unit": "rad"},
                              "b.orientation")
    with pytest.raises(ModelError, match=r"orientation.unit: required"):
        orientation_from_spec({"angles": [1, 2, 3], "sequence": "321"}, "b.orientation")


def test_result_orientation_any_sequence(examples):
    res = mbcore.run(Model.from_file(examples / "spatial_slider_crank_dynamic.yaml"),
                     settings={"t_end": 0.05})
    p = np.stack([res[f"q/crank.p{k}"] for k in range(4)], -1)
    got = res.orientation("crank", "3-2-1", unit="deg")
    np.testing.assert_allclose(np.radians(got), np.unwrap(AS.p_to_angles(p, "321"), axis=0),
                               rtol=0, atol=1e-13)
    np.testing.assert_allclose(res.orientation("crank", "1-2-3"),
                               res.orientation("crank", "bryant_123"), rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="unknown convention"):
        res.orientation("crank", "3-3-1")
