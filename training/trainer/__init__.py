"""The learned-evaluator trainer and its config (one config, one trainer)."""
