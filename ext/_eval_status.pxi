# The status an evaluation of a compiled right-hand side returns (c_eval): one enum
# for the core's and the plugins' compiled twins (ext/_dynamics.pyx, ext/plugins/*),
# 0 = OK; its names in STATUS.
cdef enum:
    OK = 0
    SINGULAR = 1              # the (Schur / Newton) matrix is singular
    FUNCTION_FAILED = 2       # a time function cannot be evaluated
    FORCE_FAILED = 3          # a force element cannot be evaluated
    NOT_FINITE = 4            # a result is not finite
    NEWTON_FAILED = 5         # cp: Newton for the dependent coordinates failed
    PARTITION_DEGRADED = 6    # cp: Phi_u is nearly singular
    SINGULAR_AHEAD = 7        # cp: past the predicted rank loss of the Jacobian
    CONSTRAINT_FAILED = 8     # a plugin's constraint kernel refused an element

STATUS = {OK: "ok", SINGULAR: "singular", FUNCTION_FAILED: "function failed",
          FORCE_FAILED: "force element failed", NOT_FINITE: "not finite",
          NEWTON_FAILED: "Newton for the dependent coordinates failed",
          PARTITION_DEGRADED: "Phi_u is nearly singular",
          SINGULAR_AHEAD: "past the predicted rank loss of the Jacobian",
          CONSTRAINT_FAILED: "constraint element failed"}
