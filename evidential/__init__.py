"""EvidentialRAG's mathematical core: opinions, conflict-preserving fusion, routing and EDL losses.

torch + stdlib only; no model I/O. The public API below is re-exported at the top level::

    import evidential
    op = evidential.opinions_from_evidence(evidence)          # Eqs 2-6
    res = evidential.fuse(op, lam=0.6, rule="lambda")          # Eqs 7-14, 27
    routes = evidential.route(res.uncertainty, 0.35, 0.65)     # Eq 15
"""

from evidential.batching import pad_evidence
from evidential.columns import COLUMN_RULES, fuse_columns
from evidential.compiled import fuse_evidence
from evidential.config import FusionConfig
from evidential.errors import ConfigError, EvidentialError, InvalidEvidenceError, ShapeError, UnknownNameError
from evidential.fusion import (
    AGGREGATION_RULES,
    FUSION_RULES,
    FusionResult,
    MassState,
    combine,
    fuse,
    mean_pairwise_conflict,
    pairwise_conflict,
)
from evidential.losses import (
    EDLDigammaLoss,
    EDLLogLoss,
    EDLLoss,
    EDLMSELoss,
    annealing_coefficient,
    edl_data_term,
    edl_loss,
    kl_dirichlet_uniform,
)
from evidential.opinions import Opinion, opinions_from_evidence, validate_evidence
from evidential.registry import Registry
from evidential.routing import (
    ABSTAIN,
    CONFLICT,
    DIRECT,
    ROUTES,
    ROUTING_POLICIES,
    Routing,
    backing_claims,
    copy_contested,
    copy_pairs,
    merge_copies,
    route,
    select_uncontested,
    stated_mask,
    witnessed_claims,
)

__version__ = "0.1.0"

__all__ = [
    "ABSTAIN",
    "CONFLICT",
    "DIRECT",
    "AGGREGATION_RULES",
    "COLUMN_RULES",
    "FUSION_RULES",
    "ROUTES",
    "ROUTING_POLICIES",
    "ConfigError",
    "EDLDigammaLoss",
    "EDLLogLoss",
    "EDLLoss",
    "EDLMSELoss",
    "EvidentialError",
    "FusionConfig",
    "FusionResult",
    "InvalidEvidenceError",
    "MassState",
    "Opinion",
    "Registry",
    "Routing",
    "ShapeError",
    "UnknownNameError",
    "annealing_coefficient",
    "combine",
    "edl_data_term",
    "edl_loss",
    "fuse",
    "fuse_columns",
    "fuse_evidence",
    "kl_dirichlet_uniform",
    "mean_pairwise_conflict",
    "opinions_from_evidence",
    "pad_evidence",
    "pairwise_conflict",
    "route",
    "backing_claims",
    "copy_contested",
    "copy_pairs",
    "merge_copies",
    "select_uncontested",
    "stated_mask",
    "witnessed_claims",
    "validate_evidence",
]
