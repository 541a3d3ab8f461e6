"""Model backends behind one interface (:mod:`.base`); each module registers its factory in ``BACKENDS``."""

from inference.backends.base import (
    BACKENDS,
    Backend,
    BackendConfig,
    BackendError,
    Generation,
    GenerationConfig,
    LabelScores,
    LabelScoringBackend,
    LogprobsUnsupportedError,
    Prompt,
    StreamingBackend,
    load_backend,
)
from inference.backends.models import PACKAGED_MODELS, ModelRef, resolve_model

__all__ = [
    "BACKENDS",
    "PACKAGED_MODELS",
    "Backend",
    "BackendConfig",
    "BackendError",
    "Generation",
    "StreamingBackend",
    "GenerationConfig",
    "LabelScores",
    "LabelScoringBackend",
    "LogprobsUnsupportedError",
    "ModelRef",
    "Prompt",
    "load_backend",
    "resolve_model",
]

# register the backends (each imports its heavy library lazily, when chosen)
from inference.backends import llamacpp, openai_http, transformers_backend, vllm_backend  # noqa: E402,F401
