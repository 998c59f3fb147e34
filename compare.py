"""Run every installed backend on the same weights and show that they agree.

    python compare.py                       # the seed demo: tokens 5 10 7 21, vocab 100, dim 10
    python compare.py --help                # the commands; python compare.py COMMAND --help

The command line lives in the package (``embedding_parity.cli``), so that the installed
``embedding-parity`` script and ``python -m embedding_parity`` are the same program.
"""

import sys

from embedding_parity.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="compare.py"))
