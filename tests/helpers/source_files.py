"""What counts as source in the package (the wheel's and the MCP host configs' checks)."""

from __future__ import annotations

import shutil

NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".lookup-lab", ".*_cache", ".hypothesis", "test-artifacts", "build", "*.egg-info", "__pycache__"
)
