"""The CDK app that puts Baton on AWS."""
