"""The explorer page: the suite's data drawn interactively, in one self-contained HTML file.

- ``explorer.html``: the page's markup and style, with two placeholders.
- ``explorer.js``: the figures, the tabs and the page's own float32 recomputation (no
  library, no network).
- ``render.write(data, path)``: the data of ``jobs.page.run`` and the script put into the
  markup, one file.
"""
