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


def load_engine_package(engine: str, package: str, stand_ins):
    """The package ``package`` (a dotted name) from engine ``engine``'s pinned files
    (``engines``), loaded under its own name beside ``stand_ins()`` ({name: module}: what the
    package imports that the kit does not load), once per process. ImportError naming the
    fetch command if the files are not in place."""
    import sys

    from embedding_parity.conformance import engines

    if engines.installed(engine) is None:
        version = engines.ENGINES[engine].version
        raise ImportError(
            f"{engine} {version}'s files are not in place: make install-conformance fetches "
            f"them (python -m embedding_parity.conformance.engines fetch {engine})"
        )
    if package in sys.modules:
        return sys.modules[package]
    sys.modules.update(stand_ins())
    where = os.path.join(engines.folder(engine), *package.split("."))
    spec = importlib.util.spec_from_file_location(
        package, os.path.join(where, "__init__.py"), submodule_search_locations=[where]
    )
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[package] = loaded
    spec.loader.exec_module(loaded)
    return loaded
