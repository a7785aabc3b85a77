"""Turning the journal into a scorecard."""
