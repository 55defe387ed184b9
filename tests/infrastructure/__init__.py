"""Infrastructure tests: the CDK app synthesized once per stage, and what its templates must say."""
