# Subnormal numbers flushed to zero inside a compiled right-hand side (included).
# Smooth motions carry exponentially small terms (a rotation that has not yet
# reached the middle of a long chain decays along it); below 2.2e-308 they become
# subnormal, and arithmetic on subnormal operands takes microcode assists that made
# a whole evaluation ~30 % slower.  Flush-to-zero and denormals-are-zero (x86 MXCSR
# bits 15 and 6) change only values below the smallest normal number; the caller's
# mode is restored before returning.  Other targets: unchanged (no-op).
cdef extern from *:
    """
    #if defined(__SSE2__) || defined(__x86_64__) || defined(_M_X64)
    #include <xmmintrin.h>
    static inline unsigned int mbcore_flush_subnormals(void) {
        unsigned int mode = _mm_getcsr();
        _mm_setcsr(mode | 0x8040u);
        return mode;
    }
    static inline void mbcore_restore_fp_mode(unsigned int mode) { _mm_setcsr(mode); }
    #else
    static inline unsigned int mbcore_flush_subnormals(void) { return 0u; }
    static inline void mbcore_restore_fp_mode(unsigned int mode) { (void) mode; }
    #endif
    """
    unsigned int mbcore_flush_subnormals() noexcept nogil
    void mbcore_restore_fp_mode(unsigned int mode) noexcept nogil
