"""The implementations people use, wrapped to the kit's contracts: one module per library, so
that the worker imports a library only when its row runs. Each function is what a user of that
library would write; the wrapping only reshapes arguments, never checks or fixes them."""

import importlib.util
import os


def load_file(package: str, *path: str, install: str):
    """The module in ``path`` under installed ``package``, loaded by its file: for a layer whose
    package imports far more than the layer's own module does. ImportError naming ``install``
    (the pip command) if the package is missing."""
    found = importlib.util.find_spec(package)
    if found is None:
        raise ImportError(f"{package} is not installed: {install}")
    spec = importlib.util.spec_from_file_location(
        f"{package}_{'_'.join(path).removesuffix('.py')}",
        os.path.join(found.submodule_search_locations[0], *path),
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
