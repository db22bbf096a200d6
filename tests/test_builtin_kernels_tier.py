"""The built-in planar force types reach the compiled evaluators through the compiled
plugin tier (``c_kernel``, mbcore_plugin.h), exactly as a third-party kernel does, and
a subclass that chooses its own kernel path does not inherit the capsule."""
from __future__ import annotations

import pytest

from mbcore.system import compiled_available
from mbplugins.planar import contact as planar_contact
from mbplugins.planar import forces as planar_forces

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

TYPES = [planar_forces.TSDA, planar_forces.RSDA, planar_forces.PointForce,
         planar_forces.Torque, planar_forces.Drag, planar_forces.FictitiousDamping,
         planar_contact.Contact]


@pytest.mark.parametrize("ftype", TYPES, ids=lambda c: c.name)
def test_a_builtin_force_type_is_a_capsule_kernel(ftype):
    from mbcore._ext import _forces
    from mbcore.plugins.compiled import load_force_kernel
    assert ftype.kernel is None and ftype.c_kernel.startswith("mbplugins._ext.")
    k = load_force_kernel(ftype)             # checked against the declaration
    info = _forces.kernel_info(k.capsule)
    assert (info["n_bodies"], info["n_par"], info["n_fun"]) == (
        len(ftype.bodies), ftype.n_par, ftype.n_fun)
    assert info["force"] and info["jacobian"] and info["body_kind"] == 0


def test_the_core_lists_no_planar_force_kind():
    from mbcore._ext import _forces
    planar = {"tsda", "rsda", "force", "torque", "drag", "damping", "contact"}
    assert not planar & set(_forces.KERNELS)
    assert not planar & set(getattr(_forces, "JAC_KERNELS", {}))


def test_a_subclass_that_sets_kernel_keeps_its_python_methods():
    class PythonTorque(planar_forces.Torque):
        name = "python_torque"
        kernel = None

    class SameTorque(planar_forces.Torque):
        name = "same_torque"

    assert PythonTorque.c_kernel is None
    assert SameTorque.c_kernel == planar_forces.Torque.c_kernel
