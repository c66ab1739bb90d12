import sys

from overt.cli import main

sys.exit(main())
