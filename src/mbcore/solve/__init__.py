"""Equations at one instant: accelerations and multipliers, assembly
(position/velocity), the formulations' base class, impacts, redundancy, linear
algebra."""
