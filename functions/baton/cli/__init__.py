"""The `baton` command (not deployed)."""
