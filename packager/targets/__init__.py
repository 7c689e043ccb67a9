"""Render targets: pure functions from a TaskSpec to an in-memory file tree."""
