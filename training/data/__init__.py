"""Training and evaluation data: the annotated-chunk format, the question-level split and the benchmark readers."""
