"""The learned evaluator: encoder + LoRA + evidential and span heads, its span loss and its checkpoints."""
