"""The pytest plugin (registered through the ``pytest11`` entry point): the ``conformance``
marker that ``parametrize_with_checks`` puts on every test it makes, so that
``pytest -m conformance`` runs just those. It imports no framework and not the kit: that
happens when a test file uses ``embedding_parity.conformance``."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "conformance(kind, check): one check of the embedding-parity conformance kit "
        "(embedding_parity.conformance.parametrize_with_checks)",
    )
