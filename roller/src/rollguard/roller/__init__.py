"""The rollguard roller: the central client an operator runs.

So far: `rollguard state URL...`, the roller's own client for agents
(`rollguard.roller.agent_client`).
"""
