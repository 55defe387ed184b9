"""What DynamoDB and S3 bill: DynamoDB's documented sizing and capacity rules (`capacity`), on-demand prices
(`prices`). Standard library only, nothing of Baton: the peers' environments import it too."""
