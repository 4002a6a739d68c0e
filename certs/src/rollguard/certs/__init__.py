"""A small PKI for rollguard: a CA, server certificates for agents, client certificates for rollers.

The files are plain PEM and work as they are with curl, the agent, the roller and Kafka.
"""
