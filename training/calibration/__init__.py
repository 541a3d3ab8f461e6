"""Calibration of evidence, λ and the routing thresholds: fitting, the file format and its application."""
