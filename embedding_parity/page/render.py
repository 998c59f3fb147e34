"""Write the explorer: the markup, the script and the data, in one self-contained file."""

from __future__ import annotations

import json
from pathlib import Path

from embedding_parity import outputs

HERE = Path(__file__).parent
MAX_BYTES = 3 * 1024 * 1024  # the default page must stay below this


def html(data: dict) -> str:
    """The page as text. The data goes in as JSON inside <script type="application/json">,
    every "<" written as the JSON escape \\u003c, so that no string in it can close the
    script element or open a comment (``<!--<script>`` would hold the parser in a state that
    swallows the page), and last, so that no string in it is taken for a marker."""
    suite_data = json.dumps(data, allow_nan=False, separators=(",", ":")).replace("<", "\\u003c")
    markup = (HERE / "explorer.html").read_text(encoding="utf-8")
    script = (HERE / "explorer.js").read_text(encoding="utf-8")
    return markup.replace("/*EXPLORER-JS*/", script).replace("/*SUITE-DATA*/", suite_data)


def write(data: dict, path: str) -> int:
    """Write the page to ``path``; returns its size in bytes."""
    text = html(data)
    outputs.write_text(path, text)
    return len(text.encode("utf-8"))
