import sys

from gramdist.cli import main

sys.exit(main())
