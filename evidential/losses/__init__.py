"""EDL losses: pure tensor functions (:mod:`.functional`) and one ``nn.Module`` per form."""

from .base import EDLLoss
from .edl_digamma import EDLDigammaLoss
from .edl_log import EDLLogLoss
from .edl_mse import EDLMSELoss
from .functional import (
    annealing_coefficient,
    edl_data_term,
    edl_loss,
    fused_mass_loss,
    kl_dirichlet_uniform,
)
from .fused_mass import FusedMassLoss

__all__ = [
    "EDLLoss",
    "EDLDigammaLoss",
    "EDLLogLoss",
    "EDLMSELoss",
    "FusedMassLoss",
    "annealing_coefficient",
    "edl_data_term",
    "edl_loss",
    "fused_mass_loss",
    "kl_dirichlet_uniform",
]
