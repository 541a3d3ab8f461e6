"""``evidential-rag index``: build a retrieval index."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from evidential.errors import EvidentialError
from inference.cli.options import ConfigOpt, SetOpt, console, fail, load


def index_cmd(
    corpus: Annotated[
        str,
        typer.Option(
            "--corpus",
            help="Corpus: a .jsonl or .parquet file, a save_to_disk dataset folder or hf:NAME[:SPLIT]. Rows are "
            "documents (text/contents/page_result/html ...) or records with a 'documents' / 'search_results' list.",
        ),
    ],
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="Index folder to write; a previous index there is replaced only once the new one is complete.",
        ),
    ],
    resume: Annotated[
        bool,
        typer.Option(
            "--resume/--no-resume",
            help="Continue an unfinished build of the same corpus and settings from its last complete shard.",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the index metadata as JSON.")] = False,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
) -> None:
    """Build a retrieval index: token chunks, FAISS embeddings (resumable shards), BM25 and metadata."""
    from inference.retrieval import build_index
    from inference.retrieval.index import work_dir

    cfg = load(config, overrides, [])
    try:
        meta = build_index(corpus, output, cfg, resume=resume, show_progress=sys.stderr.isatty())
    except EvidentialError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail(
            f"interrupted; run the same command again to continue from the last complete shard in {work_dir(output)}",
            code=130,
        )
    if as_json:
        console.print_json(json.dumps(meta, ensure_ascii=False))
        return
    t = Table(title=f"Index {output}")
    t.add_column("field")
    t.add_column("value")
    t.add_row("corpus", str(meta["corpus"]))
    t.add_row("documents (empty)", f"{meta['n_documents']} ({meta['n_empty_documents']})")
    t.add_row("chunks / shards", f"{meta['n_chunks']} / {meta['n_shards']}")
    t.add_row("chunking", f"{cfg.retrieval.chunk_tokens} tokens, overlap {cfg.retrieval.chunk_overlap}")
    t.add_row("embedder", f"{meta['embedder']} ({meta['dim']}-d)")
    t.add_row("query instruction", repr(meta["query_instruction"]))
    trained = meta.get("index_training")
    size = f"{meta['faiss_bytes'] / 2**20:,.1f} MiB" if "faiss_bytes" in meta else "size not recorded"
    t.add_row(
        "FAISS index",
        f"{meta.get('index_type') or 'Flat'} ({size}"
        + (f", trained on {trained['vectors']:,} vectors in {trained['seconds']:.1f}s)" if trained else ")"),
    )
    if meta["resumed_from_shard"] is not None:
        t.add_row("resumed from shard", str(meta["resumed_from_shard"]))
    rate = f", {meta['chunks_per_s']} chunks/s" if meta["chunks_per_s"] else ""
    times = meta["timings_s"]
    t.add_row("time", f"{times['total']:.1f}s (embedding {times['embedding']:.1f}s{rate})")
    reranker = cfg.models.reranker or "none (reranking off)"
    t.add_row("retrieval", f"{cfg.retrieval.retriever}; reranker: {reranker}")
    console.print(t)
