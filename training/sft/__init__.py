"""TRL supervised fine-tuning of the prompt evaluator's LLM on its own JSON contract."""
