"""Talking to the endpoint: the one client, the one stream reader, the probe."""
