# Shared by the spatial kernel modules (included, not imported): the rotation matrix
# of Euler parameters and small 3-vector helpers, fixed-size, no allocation.


cdef inline void _ep_A(double e0, double e1, double e2, double e3, double* A) noexcept nogil:
    """A(p) row-major, the explicit form of Nikravesh (1988), Eq. 6.18 (as
    mbcore.elements.rotations.A)."""
    A[0] = 2.0 * (e0 * e0 + e1 * e1 - 0.5)
    A[1] = 2.0 * (e1 * e2 - e0 * e3)
    A[2] = 2.0 * (e1 * e3 + e0 * e2)
    A[3] = 2.0 * (e1 * e2 + e0 * e3)
    A[4] = 2.0 * (e0 * e0 + e2 * e2 - 0.5)
    A[5] = 2.0 * (e2 * e3 - e0 * e1)
    A[6] = 2.0 * (e1 * e3 - e0 * e2)
    A[7] = 2.0 * (e2 * e3 + e0 * e1)
    A[8] = 2.0 * (e0 * e0 + e3 * e3 - 0.5)
