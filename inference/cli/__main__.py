"""``python -m inference.cli`` (e.g. ``accelerate launch -m inference.cli train-prompt-evaluator ...``)."""

from inference.cli import app

app()
