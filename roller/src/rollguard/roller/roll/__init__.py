"""The roll: restart a cluster's nodes one at a time, never a broker in log recovery."""
