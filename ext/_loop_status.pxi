# The status a compiled integration loop returns (run_rk, run_abm, run_bdf,
# run_theta): one enum for every loop, decoded in Python by
# mbcore.integrate.loop_result.LoopStatus (its values are checked against LOOP_STATUS).
cdef enum LoopStatus:
    LOOP_DONE = 0             # reached t1
    LOOP_STOPPED = 1          # the output call-back asked to stop
    LOOP_EVAL_FAILED = 2      # an evaluation (or Newton) failed: the Python driver takes over
    LOOP_STEP_TOO_SMALL = 3   # the step fell below the round-off limit
    LOOP_STOP_CONDITION = 4   # a stop condition is met in the next step
    LOOP_BUDGET = 5           # the step budget between outputs ran out

LOOP_STATUS = {"done": LOOP_DONE, "stopped": LOOP_STOPPED,
               "evaluation_failed": LOOP_EVAL_FAILED,
               "step_too_small": LOOP_STEP_TOO_SMALL,
               "stop_condition": LOOP_STOP_CONDITION, "budget": LOOP_BUDGET}
