"""EDL losses and the evidence distillation loss: pure functions (:mod:`.functional`), one module per form."""

from .base import EDLLoss
from .edl_digamma import EDLDigammaLoss
from .edl_log import EDLLogLoss
from .edl_mse import EDLMSELoss
from .evidence_distillation import EvidenceDistillationLoss
from .functional import (
    annealing_coefficient,
    edl_data_term,
    edl_loss,
    evidence_distillation_loss,
    fused_mass_loss,
    kl_dirichlet,
    kl_dirichlet_uniform,
)
from .fused_mass import FusedMassLoss

__all__ = [
    "EDLLoss",
    "EDLDigammaLoss",
    "EDLLogLoss",
    "EDLMSELoss",
    "EvidenceDistillationLoss",
    "FusedMassLoss",
    "annealing_coefficient",
    "edl_data_term",
    "edl_loss",
    "evidence_distillation_loss",
    "fused_mass_loss",
    "kl_dirichlet",
    "kl_dirichlet_uniform",
]
