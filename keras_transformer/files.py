"""Digests of files on disk, shared by the run directory and the multi-worker checks."""

import hashlib
import os


def tree_digest(directory):
    """SHA-256 (hex) of the relative names and the bytes of the files under `directory`.

    Examples:
        ```python
        tree_digest("runs/a/tokenizers") == tree_digest("runs/b/tokenizers")  # same vocabulary
        ```
    """
    digest = hashlib.sha256()
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, directory).encode() + b"\0")
            with open(path, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()
