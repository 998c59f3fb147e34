import sys

from benchmarks.lookup_add import main

sys.exit(main())
