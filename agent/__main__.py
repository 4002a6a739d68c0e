"""`python -m agent` runs the agent."""

import sys

from agent.cli import main

sys.exit(main())
