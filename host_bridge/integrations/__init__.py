"""Ready integrations of Schedule with agent frameworks (optional extras)."""
