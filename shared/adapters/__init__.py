"""Adapters to AWS: DynamoDB (store, session records, history reads), Bedrock (brain, prefetch),
API Gateway (gateway), Lambda (turn launcher), SQS (deadline alarms) and sign-in tokens.

They import the core and the wire formats, never the flows.
"""
