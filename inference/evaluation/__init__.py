"""Benchmark evaluation: dataset loaders, the paper's metrics (§4.4), judges (§4.5), the experiment runner
and paper-layout reports (``evidential-rag evaluate``)."""
