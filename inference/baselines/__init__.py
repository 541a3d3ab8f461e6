"""Baseline RAG systems on the same retriever, generator, context budget and generation length as
EvidentialRAG (the paper's matched comparison, §4.2), chosen by name through :data:`BASELINES`."""

from __future__ import annotations

from evidential.registry import Registry

from .naive import NAIVE_PROMPT_VERSION, NaiveRAG, naive_prompt

__all__ = ["BASELINES", "NAIVE_PROMPT_VERSION", "NaiveRAG", "naive_prompt"]

# name -> class with ask_batch(questions, chunks=None) -> records
BASELINES: Registry = Registry("baseline")
BASELINES.register("naive")(NaiveRAG)
