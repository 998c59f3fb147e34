"""For the tests that read what a command prints, saves or returns, and not its picture."""


def unrendered(monkeypatch) -> None:
    """Every picture is built as the command builds it (its panels, labels and title), then
    closed without being rendered to a file: rendering (Matplotlib's constrained layout,
    then Agg) is most of a command's time, and the caller reads no picture. The tests that
    read a picture render it."""
    from embedding_parity.drawing import bias, demos, heatmaps, pyplot

    def close(fig, path, *, show=False):
        pyplot().close(fig)

    for module in (bias, demos, heatmaps):
        monkeypatch.setattr(module, "save", close)
