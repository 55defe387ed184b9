"""Pure rules: models, limits, canonical JSON and hash, status lifecycle, access, errors (no AWS, no HTTP)."""
