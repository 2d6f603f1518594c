"""The conductor's pure core: turn state machine, wrapper tool, history rules. No I/O, no boto3."""
