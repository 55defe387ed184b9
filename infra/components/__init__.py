"""One construct per concern: storage, functions, api, monitoring (not named `constructs`: that is the CDK library)."""
