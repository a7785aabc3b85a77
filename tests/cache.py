"""Where the tests keep what they build or install once (model files, vLLM's environment).

Standard library only: ``python -m tests.vllm.setup`` imports it before the package is installed.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$VERIFIER_TEST_CACHE``, else ``.cache/`` at the top of the repository (ignored by git)."""
    configured = os.environ.get("VERIFIER_TEST_CACHE")
    return Path(configured) if configured else Path(__file__).resolve().parent.parent / ".cache"
