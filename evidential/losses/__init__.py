"""EDL losses and the evidence distillation loss: pure functions (:mod:`.functional`), one module per form."""

from evidential.losses.base import EDLLoss
from evidential.losses.edl_digamma import EDLDigammaLoss
from evidential.losses.edl_log import EDLLogLoss
from evidential.losses.edl_mse import EDLMSELoss
from evidential.losses.evidence_distillation import EvidenceDistillationLoss
from evidential.losses.functional import (
    annealing_coefficient,
    edl_data_term,
    edl_loss,
    evidence_distillation_loss,
    fused_mass_loss,
    kl_dirichlet,
    kl_dirichlet_uniform,
)
from evidential.losses.fused_mass import FusedMassLoss

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
