"""`python -m rollguard.agent` runs the agent."""

import sys

from rollguard.agent.cli import main

sys.exit(main())
