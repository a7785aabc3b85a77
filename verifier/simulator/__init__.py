"""The simulated vendor: a correct tiny endpoint with switchable defects (a test double)."""
