"""The fenced code blocks of the README and of the documentation site."""

import glob
import os
import re

from conftest import REPO

PAGES = ["README.md"] + sorted(
    os.path.relpath(path, REPO)
    for path in glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True)
)
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.S | re.M)


def fenced_blocks(page, language):
    """`[(line, code)]` of the `language` blocks of a page (a path from the repository root)."""
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        text = f.read()
    return [
        (text.count("\n", 0, match.start()) + 2, match.group(2))
        for match in FENCE.finditer(text)
        if match.group(1) == language
    ]


def block_after(page, after, language="python"):
    """The first `language` block of a page that follows the line containing `after`."""
    with open(os.path.join(REPO, page), encoding="utf-8") as f:
        text = f.read()
    start = text.index(after)
    return next(m.group(2) for m in FENCE.finditer(text, start) if m.group(1) == language)
