"""The HTTP server: the FastAPI app around one loaded pipeline (``evidential-rag serve``)."""
