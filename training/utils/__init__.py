"""Helpers shared by training and inference: atomic IO, typed config loading, metrics, text normalization, GGUF copies."""
