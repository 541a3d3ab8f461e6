"""Workflows that need an evaluator and a loop over data: the demo, distillation and calibration."""
