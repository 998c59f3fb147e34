import benchmarks
from benchmarks.lookup_add import main

benchmarks.run(main)
