"""Learned evaluator, data builders, trainers and calibration (built on :mod:`evidential`).

Dependencies point one way: ``inference → training → evidential``.
"""
