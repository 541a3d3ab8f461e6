"""Command line, run configuration, data and the demo; evaluators, retrieval, generation and the pipeline
build on these (dependencies point one way: ``inference → training → evidential``)."""
