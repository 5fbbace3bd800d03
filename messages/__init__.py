"""Pure values of dsh-tool-schedule: the durable protocol and the actors' message types."""
