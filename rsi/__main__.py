import sys

from rsi.cli import main

sys.exit(main())
