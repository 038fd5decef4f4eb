"""What the ingress and its route modules share about a request: its id, and whether a model name is a path."""

from __future__ import annotations

from fastapi import Request

REQUEST_ID_HEADER = "x-request-id"


def request_id(request: Request) -> str:
    return getattr(request.state, "request_id", None) or "-"


def looks_like_path(name: str) -> bool:
    """Whether a requested model name is a path (refused with 403, not 404, when paths are disabled)."""
    return any(mark in name for mark in ("/", "\\", ":", "~")) or name.startswith(".")
