"""A target whose module fails to import."""

raise RuntimeError("this module is broken on purpose")
