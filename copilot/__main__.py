import sys

from copilot.cli import main

sys.exit(main())
