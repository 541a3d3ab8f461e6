"""Data-parallel plumbing of the learned-evaluator trainer, on accelerate's process state.

``accelerate launch --multi_gpu --num_processes N -m inference.cli train …`` (or ``torchrun``) starts ``N``
copies of the trainer; :class:`DataParallel` is what they share: the rank and world size from
:class:`accelerate.PartialState` (NCCL between GPUs, gloo between CPU processes), the shard of each global
batch a rank trains on, one all-reduce of the flattened gradients per optimizer step, and the gathering of
validation results. A single process (plain ``evidential-rag train``) gets a world of one, in which every
collective is the identity, so the single-process path computes exactly what it computed before.

Why not ``Accelerator.prepare``: the trainable parameters are the LoRA adapters and the heads (under a
million for the shipped model), a step runs the encoder twice (evidence, then spans) and some steps leave a
head unused (a batch of yes/no questions trains no span). DDP's bucketed hooks need each parameter used
exactly once per backward pass; one explicit all-reduce of all gradients after the backward passes has no
such condition and, at this size, costs nothing measurable. ``Accelerator`` is also a process-wide
singleton whose settings cannot change once made, so two trainers in one process (tests, notebooks) with
different precision would clash; precision is therefore applied with :func:`torch.autocast` around the
encoder passes (see :func:`autocast`).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, TypeVar

import torch

__all__ = ["DataParallel", "autocast", "shard_bounds"]

T = TypeVar("T")


def shard_bounds(n: int, parts: int, index: int) -> tuple[int, int]:
    """``[start, end)`` of part ``index`` when ``n`` items are cut into ``parts`` contiguous parts whose
    sizes differ by at most one (the first ``n % parts`` parts take one more)."""
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, start + base + (index < extra)


def autocast(device: torch.device, mixed_precision: str):
    """The autocast context of ``mixed_precision`` (``no``, ``bf16`` or ``fp16``) on ``device``; ``no``: none."""
    if mixed_precision == "no":
        return nullcontext()
    dtype = torch.bfloat16 if mixed_precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


class DataParallel:
    """The processes of one training run (one of them when not launched distributed).

    Args:
        cpu: Train on CPU processes (gloo) even where CUDA is present; accelerate otherwise picks NCCL on
            GPUs when the run was launched with several processes.
    """

    def __init__(self, cpu: bool = False):
        from accelerate import PartialState

        self.state = PartialState(cpu=cpu)
        self.world = int(self.state.num_processes)
        self.rank = int(self.state.process_index)
        self.is_main = bool(self.state.is_main_process)

    @property
    def distributed(self) -> bool:
        return self.world > 1

    @property
    def device(self) -> torch.device:
        """The device accelerate assigned to this process (``cuda:<local rank>`` on GPUs)."""
        return torch.device(self.state.device)

    def shard(self, items: list[T]) -> tuple[list[T], int]:
        """This rank's contiguous part of ``items`` and the position of its first item in ``items``."""
        start, end = shard_bounds(len(items), self.world, self.rank)
        return items[start:end], start

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """The element-wise sum of ``values`` over all processes (``values`` itself in a world of one)."""
        if not self.distributed:
            return values
        from accelerate.utils import reduce

        return reduce(values.to(self.device), reduction="sum").to(values.device)

    def sum_gradients(self, params: list[torch.nn.Parameter]) -> None:
        """Replace every gradient by its sum over the processes, in one all-reduce of all of them.

        A parameter this process did not use in the step (no ``.grad``) contributes zeros, so every process
        ends the step with the same gradients, hence the same weights after the optimizer step.
        """
        if not self.distributed or not params:
            return
        flat = torch.cat(
            [
                (p.grad if p.grad is not None else torch.zeros_like(p)).detach().reshape(-1).float()
                for p in params
            ]
        )
        flat = self.sum(flat)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset : offset + n].view_as(p).to(p.dtype)
            offset += n

    def gather(self, obj: Any) -> list[Any]:
        """``obj`` of every process, in rank order, on every process (``[obj]`` in a world of one)."""
        if not self.distributed:
            return [obj]
        from accelerate.utils import gather_object

        # gather_object flattens one level: wrap so that each process contributes exactly one element
        return gather_object([obj])

    def wait(self) -> None:
        """Block until every process reaches this point (after the main process wrote a checkpoint)."""
        if self.distributed:
            self.state.wait_for_everyone()
