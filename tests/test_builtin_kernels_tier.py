"""Every built-in element type reaches the compiled evaluators through the compiled
plugin tier (``c_kernel``, mbcore_plugin.h), exactly as a third-party kernel does: the
core's extension lists no joint or force kind; a subclass that chooses its own kernel
path does not inherit the capsule, one that names a built-in kernel runs it."""
from __future__ import annotations

import pytest

from mbcore.system import compiled_available
from mbplugins.planar import contact as planar_contact
from mbplugins.planar import forces as planar_forces
from mbplugins.spatial import forces as spatial_forces

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

TYPES = [planar_forces.TSDA, planar_forces.RSDA, planar_forces.PointForce,
         planar_forces.Torque, planar_forces.Drag, planar_forces.FictitiousDamping,
         planar_contact.Contact, spatial_forces.SpatialTSDA, spatial_forces.SpatialRSDA,
         spatial_forces.Bushing, spatial_forces.SpatialPointForce,
         spatial_forces.SpatialTorque, spatial_forces.SpatialDrag]


@pytest.mark.parametrize("ftype", TYPES, ids=lambda c: c.name)
def test_a_builtin_force_type_is_a_capsule_kernel(ftype):
    from mbcore._ext import _forces
    from mbcore.plugins.compiled import load_force_kernel
    assert ftype.c_kernel.startswith("mbplugins._ext.")
    k = load_force_kernel(ftype)             # checked against the declaration
    info = _forces.kernel_info(k.capsule)
    assert info["name"] == ftype.kernel
    assert (info["n_bodies"], info["n_par"], info["n_fun"]) == (
        len(ftype.bodies), ftype.n_par, ftype.n_fun)
    assert info["force"] and info["jacobian"]
    assert info["body_kind"] == (1 if ftype.body_kind == "spatial" else 0)
    # per-element state: the spatial RSDA's tracked angle in its own parameters
    assert info["stateful"] == (ftype is spatial_forces.SpatialRSDA)


def test_the_core_lists_no_joint_or_force_kind():
    """The evaluators' modules hold no table of element kinds, and refuse a group
    without a kernel capsule."""
    import numpy as np

    from mbcore._ext import _forces, _planar
    for mod in (_forces, _planar):
        assert not hasattr(mod, "KERNELS") and not hasattr(mod, "SPATIAL_KERNELS"), mod
        assert not hasattr(mod, "JAC_KERNELS") and not hasattr(mod, "REASONS"), mod
    with pytest.raises(ValueError, match="no kernel capsule"):
        _forces.ForceEvaluator(6, [dict(kernel="tsda", boff=np.array([[0, 3]]),
                                        par=np.zeros(7), fidx=np.zeros((1, 1), np.intp))])


def test_the_core_extension_sources_name_no_element_kind():
    """The core's C sources (ext/*.pyx, ext/*.pxi: not the plugins' ext/plugins) have no
    kind codes of joints or forces: the only kernel of the core is the spatial body
    kind's normalization.  (The time functions of ``_functions`` are the model's
    function table, not element types: their codes stay.)"""
    import re
    from pathlib import Path
    ext = Path(__file__).parents[1] / "ext"
    if not ext.is_dir():
        pytest.skip("no source tree")
    codes = re.compile(r"\b(K_[A-Z0-9_]+|S_(TSDA|RSDA|FORCE|TORQUE|DRAG|BUSHING)|F_EXTERNAL)\b")
    found = {f.name: sorted({m.group(1) for m in codes.finditer(f.read_text())})
             for f in sorted(ext.glob("*.p*"))
             if f.suffix in (".pyx", ".pxi", ".pxd") and f.name != "_functions.pyx"}
    assert {k: v for k, v in found.items() if v} == {}


def test_a_subclass_that_sets_kernel_keeps_its_python_methods():
    class PythonTorque(planar_forces.Torque):
        name = "python_torque"
        kernel = None

    class SameTorque(planar_forces.Torque):
        name = "same_torque"

    assert PythonTorque.c_kernel is None
    assert SameTorque.c_kernel == planar_forces.Torque.c_kernel
