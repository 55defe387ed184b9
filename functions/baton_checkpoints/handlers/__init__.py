"""Lambda entry points: thin."""
