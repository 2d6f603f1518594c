"""The local SQS: the tool-deadline queue on moto's server (SQS shares the DynamoDB server's port) and
the event source mapping that feeds it to the tool-deadline function.
"""
