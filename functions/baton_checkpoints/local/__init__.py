"""`baton serve`: the local API Gateway emulator and embedded moto (not deployed)."""
