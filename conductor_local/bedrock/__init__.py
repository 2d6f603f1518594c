"""The local Bedrock runtime endpoint: Converse/ConverseStream as strict as Bedrock, with the
offline brain that answers without a model.
"""
