"""Repositories: the only code that knows DynamoDB keys and calls AWS."""
